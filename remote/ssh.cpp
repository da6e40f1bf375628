#include "remote/ssh.h"

#include <fcntl.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "engine/io/output_file.h"
#include "remote/shell.h"

namespace netloom::remote {

namespace {

std::string typeName(ssh_key key) {
  const char* t = ssh_key_type_to_char(ssh_key_type(key));
  return t ? t : "unknown";
}

}  // namespace

std::string HostSpec::label() const {
  return (user.empty() ? "" : user + "@") + address + (port > 0 ? ":" + std::to_string(port) : "");
}

bool splitAddress(const std::string& text, std::string& user, std::string& address, int& port) {
  std::string rest = text;
  user.clear();
  port = 0;
  if (auto at = rest.rfind('@'); at != std::string::npos)
    user = rest.substr(0, at), rest.erase(0, at + 1);
  std::string portText;
  if (!rest.empty() && rest[0] == '[') {
    auto close = rest.find(']');
    if (close == std::string::npos) return false;
    address = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return false;
      portText = rest.substr(close + 2);
    }
  } else if (auto colon = rest.find(':'); colon != std::string::npos) {
    if (rest.find(':', colon + 1) != std::string::npos) {
      address = rest;  // a bare IPv6 address
    } else {
      address = rest.substr(0, colon);
      portText = rest.substr(colon + 1);
    }
  } else {
    address = rest;
  }
  if (!portText.empty()) {
    if (portText.find_first_not_of("0123456789") != std::string::npos || portText.size() > 5)
      return false;
    port = std::atoi(portText.c_str());
    if (port <= 0 || port > 65535) return false;
  }
  // A leading '-' would read as an option to ssh; whitespace never names a host.
  return !address.empty() && address[0] != '-' &&
         address.find_first_of(" \t\n'\"\\$`;&|<>") == std::string::npos &&
         user.find_first_of(" \t\n'\"\\$`;&|<>/") == std::string::npos;
}

struct SshSession::Impl {
  ssh_session s = nullptr;
  sftp_session sftp = nullptr;
  ~Impl() {
    if (sftp) sftp_free(sftp);
    if (s) {
      ssh_disconnect(s);
      ssh_free(s);
    }
  }
  std::string error() const { return s ? ssh_get_error(s) : "no session"; }
};

SshSession::SshSession() : m_impl(std::make_unique<Impl>()) {}
SshSession::~SshSession() = default;

bool SshSession::connected() const {
  return m_impl->s && ssh_is_connected(m_impl->s);
}

void SshSession::disconnect() {
  m_impl = std::make_unique<Impl>();
  m_keyChecked = false;
}

Result<HostKey> SshSession::connect(const HostSpec& host) {
  disconnect();
  m_host = host;
  ssh_session s = ssh_new();
  if (!s) return makeError("cannot create an SSH session");
  m_impl->s = s;
  long timeout = host.timeoutSeconds;
  int port = host.port;
  ssh_options_set(s, SSH_OPTIONS_HOST, host.address.c_str());
  ssh_options_set(s, SSH_OPTIONS_PORT, &port);
  ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout);
  if (!host.user.empty()) ssh_options_set(s, SSH_OPTIONS_USER, host.user.c_str());
  if (!host.knownHosts.empty()) {
    ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, host.knownHosts.c_str());
    // Only the file given: the system-wide one must not vouch for a test's host.
    ssh_options_set(s, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
  }
  if (host.readSshConfig &&
      ssh_options_parse_config(s, host.sshConfig.empty() ? nullptr : host.sshConfig.c_str()) != 0)
    return makeError(host.label() + ": cannot read " +
                     (host.sshConfig.empty() ? std::string("~/.ssh/config") : host.sshConfig));
  // What the caller set wins over ~/.ssh/config.
  if (port > 0) ssh_options_set(s, SSH_OPTIONS_PORT, &port);
  if (!host.user.empty()) ssh_options_set(s, SSH_OPTIONS_USER, host.user.c_str());
  if (!host.jump.empty()) {
    std::string ju, ja;
    int jp = 0;
    if (!splitAddress(host.jump, ju, ja, jp))
      return makeError(host.label() + ": the jump host '" + host.jump +
                       "' is not [user@]host[:port]");
    // OpenSSH's client carries the connection (ssh -W); in batch mode it never
    // asks, so the jump host's key must already be known: nothing is accepted
    // silently there either. libssh fills in %h and %p.
    std::vector<std::string> argv{"ssh", "-o", "BatchMode=yes", "-o",
                                  "ConnectTimeout=" + std::to_string(timeout)};
    if (!host.knownHosts.empty())
      argv.insert(argv.end(), {"-o", "UserKnownHostsFile=" + host.knownHosts});
    if (!host.identity.empty()) argv.insert(argv.end(), {"-i", host.identity});
    if (jp > 0) argv.insert(argv.end(), {"-p", std::to_string(jp)});
    if (!ju.empty()) argv.insert(argv.end(), {"-l", ju});
    argv.insert(argv.end(), {"-W", "%h:%p", "--", ja});
    std::string cmd = shellCommand(argv);
    ssh_options_set(s, SSH_OPTIONS_PROXYCOMMAND, cmd.c_str());
  }
  if (ssh_connect(s) != SSH_OK)
    return makeError(host.label() + ": cannot connect: " + m_impl->error());

  ssh_key key = nullptr;
  if (ssh_get_server_publickey(s, &key) != SSH_OK)
    return makeError(host.label() + ": the server sent no host key");
  HostKey hk;
  hk.type = typeName(key);
  unsigned char* hash = nullptr;
  size_t len = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) == 0) {
    char* fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
    if (fp) hk.fingerprint = fp;
    ssh_string_free_char(fp);
    ssh_clean_pubkey_hash(&hash);
  }
  ssh_key_free(key);
  switch (ssh_session_is_known_server(s)) {
    case SSH_KNOWN_HOSTS_OK: hk.state = HostKey::State::Known; break;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER: hk.state = HostKey::State::Changed; break;
    case SSH_KNOWN_HOSTS_NOT_FOUND:
    case SSH_KNOWN_HOSTS_UNKNOWN: hk.state = HostKey::State::Unknown; break;
    case SSH_KNOWN_HOSTS_ERROR:
    default: return makeError(host.label() + ": cannot read known_hosts: " + m_impl->error());
  }
  m_keyChecked = hk.state == HostKey::State::Known;
  return hk;
}

Status SshSession::trustHost() {
  if (!m_impl->s) return makeError("not connected");
  if (ssh_session_is_known_server(m_impl->s) == SSH_KNOWN_HOSTS_CHANGED)
    return makeError(m_host.label() + ": the host key has changed: refusing to trust it");
  if (ssh_session_update_known_hosts(m_impl->s) != SSH_OK)
    return makeError(m_host.label() + ": cannot write known_hosts: " + m_impl->error());
  m_keyChecked = true;
  return {};
}

Status SshSession::authenticate(
    const std::function<std::string(const std::string& keyFile)>& passphrase) {
  if (!connected()) return makeError("not connected");
  if (!m_keyChecked)
    return makeError(m_host.label() + ": the host key is not trusted: nothing was sent");
  ssh_session s = m_impl->s;
  if (!m_host.identity.empty()) {
    ssh_key key = nullptr;
    int rc = ssh_pki_import_privkey_file(m_host.identity.c_str(), nullptr, nullptr, nullptr, &key);
    if (rc != SSH_OK && passphrase) {
      std::string secret = passphrase("passphrase of " + m_host.identity);
      rc = ssh_pki_import_privkey_file(m_host.identity.c_str(), secret.c_str(), nullptr, nullptr,
                                       &key);
      std::fill(secret.begin(), secret.end(), '\0');
    }
    if (rc != SSH_OK)
      return makeError(m_host.identity + ": cannot read the private key (wrong passphrase?)");
    rc = ssh_userauth_publickey(s, nullptr, key);
    ssh_key_free(key);
    if (rc == SSH_AUTH_SUCCESS) return {};
    return makeError(m_host.label() + ": the key " + m_host.identity + " was refused");
  }
  if (std::getenv("SSH_AUTH_SOCK") && ssh_userauth_agent(s, nullptr) == SSH_AUTH_SUCCESS) return {};
  if (ssh_userauth_publickey_auto(s, nullptr, nullptr) == SSH_AUTH_SUCCESS) return {};
  // A password, where the host takes one and someone can be asked.
  if (passphrase && (ssh_userauth_list(s, nullptr) & SSH_AUTH_METHOD_PASSWORD)) {
    std::string secret = passphrase("password of " + m_host.label());
    int rc = secret.empty() ? SSH_AUTH_DENIED : ssh_userauth_password(s, nullptr, secret.c_str());
    std::fill(secret.begin(), secret.end(), '\0');
    if (rc == SSH_AUTH_SUCCESS) return {};
    return makeError(m_host.label() + ": the password was refused");
  }
  return makeError(m_host.label() +
                   ": no key was accepted (tried ssh-agent and ~/.ssh's keys): " + m_impl->error());
}

Result<CommandResult> SshSession::run(const std::vector<std::string>& argv,
                                      const std::string& stdinData) {
  return runRaw(shellCommand(argv), stdinData);
}

std::string SshSession::withEnv(const std::string& commandLine) const {
  if (m_host.env.empty()) return commandLine;
  std::string script = "{\n";
  for (const std::string& line : m_host.env) script += line + "\n";
  return script + "} >&2\n" + commandLine;
}

Result<CommandResult> SshSession::runRaw(const std::string& commandLine,
                                         const std::string& stdinData) {
  if (!connected()) return makeError("not connected");
  ssh_channel ch = ssh_channel_new(m_impl->s);
  if (!ch) return makeError(m_host.label() + ": cannot open a channel: " + m_impl->error());
  struct Closer {
    ssh_channel c;
    ~Closer() {
      ssh_channel_close(c);
      ssh_channel_free(c);
    }
  } closer{ch};
  if (ssh_channel_open_session(ch) != SSH_OK ||
      ssh_channel_request_exec(ch, withEnv(commandLine).c_str()) != SSH_OK)
    return makeError(m_host.label() + ": cannot run a command: " + m_impl->error());
  if (!stdinData.empty() &&
      ssh_channel_write(ch, stdinData.data(), uint32_t(stdinData.size())) != int(stdinData.size()))
    return makeError(m_host.label() + ": cannot write the command's input: " + m_impl->error());
  ssh_channel_send_eof(ch);
  CommandResult r;
  char buf[16384];
  // Both streams, in turn, until the remote side closes them.
  while (!ssh_channel_is_eof(ch)) {
    for (int isErr = 0; isErr < 2; ++isErr) {
      int n = ssh_channel_read_timeout(ch, buf, sizeof buf, isErr, 100);
      if (n == SSH_ERROR)
        return makeError(m_host.label() + ": connection lost: " + m_impl->error());
      if (n > 0) (isErr ? r.err : r.out).append(buf, size_t(n));
    }
  }
  for (int isErr = 0; isErr < 2; ++isErr)
    for (int n; (n = ssh_channel_read_nonblocking(ch, buf, sizeof buf, isErr)) > 0;)
      (isErr ? r.err : r.out).append(buf, size_t(n));
  r.exitStatus = ssh_channel_get_exit_status(ch);
  return r;
}

struct CommandStream::Impl {
  ssh_session s = nullptr;
  ssh_channel ch = nullptr;
  int exitStatus = -1;
  ~Impl() {
    if (ch) {
      ssh_channel_close(ch);
      ssh_channel_free(ch);
    }
  }
};

CommandStream::~CommandStream() = default;

int CommandStream::exitStatus() const {
  return m_impl->exitStatus;
}

Result<bool> CommandStream::read(std::string& out, int timeoutMs, int wakeFd) {
  ssh_channel ch = m_impl->ch;
  char buf[16384];
  auto lost = [&] {
    return makeError(std::string("connection lost: ") + ssh_get_error(m_impl->s));
  };
  // What libssh holds or the socket has now, read without waiting.
  int ready = ssh_channel_poll(ch, 0);
  if (ready == SSH_ERROR) return lost();
  if (ready == 0 && !ssh_channel_is_eof(ch)) {
    pollfd fds[2] = {{ssh_get_fd(m_impl->s), POLLIN, 0}, {wakeFd, POLLIN, 0}};
    int n;
    do n = ::poll(fds, wakeFd >= 0 ? 2 : 1, timeoutMs);
    while (n < 0 && errno == EINTR);
    if (n > 0 && fds[0].revents) ready = ssh_channel_poll(ch, 0);  // takes the packets in
    if (ready == SSH_ERROR) return lost();
  }
  for (int k; (k = ssh_channel_read_nonblocking(ch, buf, sizeof buf, 0)) > 0;)
    out.append(buf, size_t(k));
  // stderr is not the stream.
  while (ssh_channel_read_nonblocking(ch, buf, sizeof buf, 1) > 0) {
  }
  if (ssh_channel_is_eof(ch)) {
    for (int k; (k = ssh_channel_read_nonblocking(ch, buf, sizeof buf, 0)) > 0;)
      out.append(buf, size_t(k));
    m_impl->exitStatus = ssh_channel_get_exit_status(ch);
    return false;
  }
  if (!ssh_channel_is_open(ch)) return lost();
  return true;
}

Status CommandStream::closeInput() {
  if (ssh_channel_send_eof(m_impl->ch) != SSH_OK)
    return makeError(std::string("connection lost: ") + ssh_get_error(m_impl->s));
  return {};
}

Status CommandStream::write(const std::string& bytes) {
  if (ssh_channel_write(m_impl->ch, bytes.data(), uint32_t(bytes.size())) != int(bytes.size()))
    return makeError(std::string("connection lost: ") + ssh_get_error(m_impl->s));
  return {};
}

Result<std::unique_ptr<CommandStream>> SshSession::stream(const std::vector<std::string>& argv,
                                                          bool keepInput) {
  if (!connected()) return makeError("not connected");
  auto st = std::unique_ptr<CommandStream>(new CommandStream);
  st->m_impl = std::make_unique<CommandStream::Impl>();
  st->m_impl->s = m_impl->s;
  ssh_channel ch = ssh_channel_new(m_impl->s);
  if (!ch) return makeError(m_host.label() + ": cannot open a channel: " + m_impl->error());
  st->m_impl->ch = ch;
  if (ssh_channel_open_session(ch) != SSH_OK ||
      ssh_channel_request_exec(ch, withEnv(shellCommand(argv)).c_str()) != SSH_OK)
    return makeError(m_host.label() + ": cannot run a command: " + m_impl->error());
  if (!keepInput) ssh_channel_send_eof(ch);
  return st;
}

Status SshSession::openSftp() {
  if (!connected()) return makeError("not connected");
  if (m_impl->sftp) return {};
  sftp_session sf = sftp_new(m_impl->s);
  if (!sf) return makeError(m_host.label() + ": cannot start SFTP: " + m_impl->error());
  if (sftp_init(sf) != SSH_OK) {
    sftp_free(sf);
    return makeError(m_host.label() + ": the host offers no SFTP: " + m_impl->error());
  }
  m_impl->sftp = sf;
  return {};
}

Result<RemoteFileInfo> SshSession::stat(const std::string& path) {
  if (Status st = openSftp(); !st) return st.error();
  RemoteFileInfo info;
  sftp_attributes a = sftp_stat(m_impl->sftp, path.c_str());
  if (!a) {
    if (sftp_get_error(m_impl->sftp) == SSH_FX_NO_SUCH_FILE) return info;
    return makeError(m_host.label() + ": " + path + ": " + m_impl->error());
  }
  info.exists = true;
  info.isDir = a->type == SSH_FILEXFER_TYPE_DIRECTORY;
  info.size = a->size;
  sftp_attributes_free(a);
  return info;
}

Status SshSession::makeDirs(const std::string& path) {
  if (path.empty() || path[0] != '/') return makeError(path + ": not an absolute remote path");
  for (size_t at = 1;; ++at) {
    at = path.find('/', at);
    std::string part = path.substr(0, at);
    auto info = stat(part);
    if (!info) return info.error();
    if (!info->exists && sftp_mkdir(m_impl->sftp, part.c_str(), 0755) != 0)
      return makeError(m_host.label() + ": cannot make " + part + ": " + m_impl->error());
    if (info->exists && !info->isDir)
      return makeError(m_host.label() + ": " + part + " is not a folder");
    if (at == std::string::npos) return {};
  }
}

Status SshSession::uploadFrom(std::FILE* in, uint64_t total, const std::string& path,
                              const std::function<void(uint64_t, uint64_t)>& progress) {
  if (Status st = openSftp(); !st) return st;
  const std::string part = path + ".part";
  sftp_file f = sftp_open(m_impl->sftp, part.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!f) return makeError(m_host.label() + ": cannot write " + part + ": " + m_impl->error());
  uint64_t done = 0;
  std::string buf(32768, '\0');
  bool ok = true;
  for (size_t n; ok && (n = std::fread(buf.data(), 1, buf.size(), in)) > 0;) {
    ok = sftp_write(f, buf.data(), n) == ssize_t(n);
    done += ok ? n : 0;
    if (ok && progress) progress(done, total);
  }
  ok = (sftp_close(f) == 0) && ok;
  if (ok && done == total) {
    sftp_unlink(m_impl->sftp, path.c_str());
    if (sftp_rename(m_impl->sftp, part.c_str(), path.c_str()) == 0) return {};
  }
  std::string why = m_impl->error();
  sftp_unlink(m_impl->sftp, part.c_str());
  // The commonest cause is a full disk; say so, with what is left there.
  std::string dir = path.substr(0, path.rfind('/') + 1);
  std::string freeText;
  if (auto avail = freeBytes(dir)) {
    freeText = "; " + std::to_string(*avail >> 20) + " MiB free there";
    if (*avail < total - done)
      freeText = "; the host's disk is full (" + freeText.substr(2) + ", " +
                 std::to_string((total + (1 << 20) - 1) >> 20) + " MiB needed)";
  }
  return makeError(m_host.label() + ": cannot write " + path + " (" + std::to_string(done) +
                   " of " + std::to_string(total) + " bytes sent): " + why + freeText);
}

Result<uint64_t> SshSession::freeBytes(const std::string& dir) {
  auto df = run({"sh", "-c", "df -Pk \"$1\" | awk 'NR==2 {print $4}'", "sh", dir});
  if (!df) return df.error();
  if (df->exitStatus != 0 || df->out.empty())
    return makeError(m_host.label() + ": df " + dir + " failed");
  return std::strtoull(df->out.c_str(), nullptr, 10) * 1024;
}

Status SshSession::uploadFile(const std::string& localPath, const std::string& path,
                              const std::function<void(uint64_t, uint64_t)>& progress) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(localPath.c_str(), "rb"),
                                                     std::fclose);
  if (!in) return makeError(localPath + ": cannot open: " + std::strerror(errno));
  struct ::stat st;
  if (::fstat(::fileno(in.get()), &st) != 0) return makeError(localPath + ": cannot stat");
  return uploadFrom(in.get(), uint64_t(st.st_size), path, progress);
}

Status SshSession::uploadBytes(const std::string& bytes, const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(
      bytes.empty() ? std::tmpfile()
                    : fmemopen(const_cast<char*>(bytes.data()), bytes.size(), "rb"),
      std::fclose);
  if (!in) return makeError("cannot buffer " + path);
  return uploadFrom(in.get(), bytes.size(), path, nullptr);
}

Status SshSession::downloadFile(const std::string& path, const std::string& localPath) {
  if (Status st = openSftp(); !st) return st;
  sftp_file f = sftp_open(m_impl->sftp, path.c_str(), O_RDONLY, 0);
  if (!f) return makeError(m_host.label() + ": cannot read " + path + ": " + m_impl->error());
  // Whole or not at all, and never over a device or through a link's name.
  OutputFile out;
  Status st = out.open(localPath);
  std::string buf(65536, '\0');
  ssize_t n = 0;
  while (st && (n = sftp_read(f, buf.data(), buf.size())) > 0)
    st = out.write(buf.data(), size_t(n));
  const std::string readError = n < 0 ? m_impl->error() : std::string();
  sftp_close(f);
  if (!st) return st;
  if (n < 0) return makeError(m_host.label() + ": cannot download " + path + ": " + readError);
  return out.commit();
}

Result<std::vector<RemoteFileInfo>> SshSession::listDir(const std::string& dir) {
  if (Status st = openSftp(); !st) return st.error();
  sftp_dir d = sftp_opendir(m_impl->sftp, dir.c_str());
  if (!d) return makeError(m_host.label() + ": cannot list " + dir + ": " + m_impl->error());
  std::vector<RemoteFileInfo> entries;
  while (sftp_attributes a = sftp_readdir(m_impl->sftp, d)) {
    std::string name = a->name ? a->name : "";
    bool file = a->type == SSH_FILEXFER_TYPE_REGULAR,
         folder = a->type == SSH_FILEXFER_TYPE_DIRECTORY;
    if ((file || folder) && !name.empty() && name != "." && name != "..")
      entries.push_back({name, true, folder, a->size});
    sftp_attributes_free(a);
  }
  sftp_closedir(d);
  std::sort(entries.begin(), entries.end(),
            [](const auto& x, const auto& y) { return x.name < y.name; });
  return entries;
}

Result<std::unique_ptr<SshSession>> openSession(
    const HostSpec& host, const std::function<bool(const HostKey&)>& acceptUnknown,
    const std::function<std::string(const std::string& keyFile)>& passphrase) {
  auto session = std::make_unique<SshSession>();
  auto key = session->connect(host);
  if (!key) return key.error();
  if (key->state == HostKey::State::Changed)
    return makeError("WARNING: the host key of " + host.label() + " has CHANGED (now " + key->type +
                     " " + key->fingerprint +
                     "). Someone may be intercepting the connection, or the host was "
                     "reinstalled; refusing to connect. Remove the old key from known_hosts "
                     "only if you know why it changed.");
  if (key->state == HostKey::State::Unknown) {
    if (!acceptUnknown || !acceptUnknown(*key))
      return makeError(host.label() + ": unknown host key " + key->type + " " + key->fingerprint +
                       ": not accepted, nothing was sent");
    if (Status s = session->trustHost(); !s) return s.error();
  }
  if (Status s = session->authenticate(passphrase); !s) return s.error();
  return session;
}

}  // namespace netloom::remote
