// One SSH connection to a host (libssh): the host key checked against known_hosts
// before anything is sent, authentication by ssh-agent or an identity file, and
// commands run from quoted arguments. No secret is written anywhere: a passphrase
// comes from the caller and lives only for the call that needs it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/util/status.h"

namespace netloom::remote {

struct HostSpec {
  std::string address;  // host name or IP
  int port = 22;
  std::string user;           // empty: the local user name
  std::string identity;       // a private key file; empty: ssh-agent, then ~/.ssh's keys
  std::string knownHosts;     // empty: ~/.ssh/known_hosts
  bool readSshConfig = true;  // honour ~/.ssh/config for what it sets
  int timeoutSeconds = 15;

  std::string label() const;  // "user@address:port", for messages
};

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
  // Authenticates after a Known key (or a trusted one): ssh-agent, the identity
  // file, then the default keys; `passphrase` is asked for an encrypted key.
  Status authenticate(
      const std::function<std::string(const std::string& keyFile)>& passphrase = nullptr);
  // Runs a command built from `argv` (every argument quoted) and collects its
  // output; `stdinData` is written to its standard input.
  Result<CommandResult> run(const std::vector<std::string>& argv,
                            const std::string& stdinData = {});
  // Runs a command line as it is: only for text the user wrote in a host's
  // settings (environment lines such as `module load cuda`).
  Result<CommandResult> runRaw(const std::string& commandLine, const std::string& stdinData = {});

  bool connected() const;
  const HostSpec& host() const { return m_host; }
  void disconnect();

 private:
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
