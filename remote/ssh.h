// One SSH connection to a host (libssh): the host key checked against known_hosts
// before anything is sent, authentication by ssh-agent or an identity file, and
// commands run from quoted arguments. No secret is written anywhere: a passphrase
// comes from the caller and lives only for the call that needs it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/util/status.h"

namespace netloom::remote {

struct HostSpec {
  std::string address;        // host name, IP, or a ~/.ssh/config alias
  int port = 0;               // 0: ~/.ssh/config's, else 22
  std::string user;           // empty: the local user name
  std::string identity;       // a private key file; empty: ssh-agent, then ~/.ssh's keys
  std::string knownHosts;     // empty: ~/.ssh/known_hosts
  std::string jump;           // "[user@]host[:port]" to connect through (ssh -W), or empty
  bool readSshConfig = true;  // honour ~/.ssh/config for what it sets
  std::string sshConfig;      // another config file to read instead; empty: ~/.ssh/config
  int timeoutSeconds = 15;
  // Shell lines run before every command (`module load cuda`): text the user wrote
  // for this host, run as written; their output goes to the command's stderr.
  std::vector<std::string> env;

  std::string label() const;  // "user@address:port", for messages
};

// "[user@]address[:port]" split into its parts; false when malformed. A bracketed
// IPv6 address ("[::1]:2222") keeps its colons.
bool splitAddress(const std::string& text, std::string& user, std::string& address, int& port);

// What the host key check found.
struct HostKey {
  enum class State { Known, Unknown, Changed };
  State state = State::Unknown;
  std::string fingerprint;  // "SHA256:…" of the server's key
  std::string type;         // "ssh-ed25519", …
};

struct CommandResult {
  int exitStatus = -1;
  std::string out, err;
};

// A command whose output is read as it comes (`tail -f`), on an open session.
class CommandStream {
 public:
  ~CommandStream();
  // Appends what the command wrote to stdout, waiting up to `timeoutMs` (-1: no
  // limit) on the connection's socket and on `wakeFd` (when not -1), whichever is
  // readable first: a wait another thread ends by writing to `wakeFd`. False once
  // the command ended and everything was read; an error when the connection is lost.
  Result<bool> read(std::string& out, int timeoutMs, int wakeFd = -1);
  // Writes to the command's standard input (a stream opened with its input open).
  Status write(const std::string& bytes);
  // Ends the command's standard input (EOF).
  Status closeInput();
  int exitStatus() const;

 private:
  friend class SshSession;
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// A remote file, as SFTP sees it.
struct RemoteFileInfo {
  std::string name;  // in listDir
  bool exists = false;
  bool isDir = false;
  uint64_t size = 0;
};

class SshSession {
 public:
  SshSession();
  ~SshSession();
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  // Opens the TCP connection and runs the key exchange; nothing of the user's is
  // sent yet. The returned key says whether known_hosts knows the server.
  Result<HostKey> connect(const HostSpec& host);
  // Adds the server's key to known_hosts: only after the user accepted an Unknown
  // key's fingerprint.
  Status trustHost();
  // Authenticates after a Known key (or a trusted one): the identity file, else
  // ssh-agent and the default keys, then a password where the host takes one.
  // `passphrase` is asked for a secret ("passphrase of KEYFILE", "password of
  // user@host") and returns it; the secret is wiped after use.
  Status authenticate(
      const std::function<std::string(const std::string& keyFile)>& passphrase = nullptr);
  // Runs a command built from `argv` (every argument quoted) and collects its
  // output; `stdinData` is written to its standard input.
  Result<CommandResult> run(const std::vector<std::string>& argv,
                            const std::string& stdinData = {});
  // Runs a command line as it is: only for text the user wrote in a host's
  // settings (environment lines such as `module load cuda`).
  Result<CommandResult> runRaw(const std::string& commandLine, const std::string& stdinData = {});
  // Starts a command built from `argv` and hands back its output stream. The
  // stream must be dropped before the session.
  // With `keepInput`, the command's standard input stays open for write().
  Result<std::unique_ptr<CommandStream>> stream(const std::vector<std::string>& argv,
                                                bool keepInput = false);

  // SFTP. Paths on the host are absolute. `upload` writes `path.part` and renames
  // it, so the final name appears only once complete; a failure names the file and
  // the free space left there when the disk is full.
  Result<RemoteFileInfo> stat(const std::string& path);
  Status makeDirs(const std::string& path);  // like mkdir -p
  Status uploadFile(const std::string& localPath, const std::string& path,
                    const std::function<void(uint64_t done, uint64_t total)>& progress = nullptr);
  Status uploadBytes(const std::string& bytes, const std::string& path);
  Status downloadFile(const std::string& path, const std::string& localPath);
  // Bytes free to the user on the file system holding `dir`.
  Result<uint64_t> freeBytes(const std::string& dir);
  // The remote folder's files and folders (no "." or ".."; links are left out).
  Result<std::vector<RemoteFileInfo>> listDir(const std::string& dir);

  bool connected() const;
  const HostSpec& host() const { return m_host; }
  void disconnect();

 private:
  Status openSftp();
  Status uploadFrom(std::FILE* in, uint64_t total, const std::string& path,
                    const std::function<void(uint64_t, uint64_t)>& progress);
  std::string withEnv(const std::string& commandLine) const;
  struct Impl;
  std::unique_ptr<Impl> m_impl;
  HostSpec m_host;
  bool m_keyChecked = false;  // Known, or trusted by the user
};

// Connects, checks the key (an Unknown one is accepted only if `acceptUnknown`
// says so, after seeing its fingerprint; a Changed one never), authenticates.
Result<std::unique_ptr<SshSession>> openSession(
    const HostSpec& host, const std::function<bool(const HostKey&)>& acceptUnknown,
    const std::function<std::string(const std::string& keyFile)>& passphrase = nullptr);

}  // namespace netloom::remote
