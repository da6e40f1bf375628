#include "remote/ssh.h"

#include <libssh/libssh.h>

#include <cstdlib>

#include "remote/shell.h"

namespace netloom::remote {

namespace {

std::string typeName(ssh_key key) {
  const char* t = ssh_key_type_to_char(ssh_key_type(key));
  return t ? t : "unknown";
}

}  // namespace

std::string HostSpec::label() const {
  return (user.empty() ? "" : user + "@") + address + ":" + std::to_string(port);
}

struct SshSession::Impl {
  ssh_session s = nullptr;
  ~Impl() {
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
  if (host.readSshConfig) ssh_options_parse_config(s, nullptr);
  // What the caller set wins over ~/.ssh/config.
  ssh_options_set(s, SSH_OPTIONS_PORT, &port);
  if (!host.user.empty()) ssh_options_set(s, SSH_OPTIONS_USER, host.user.c_str());
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
      std::string secret = passphrase(m_host.identity);
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
  return makeError(m_host.label() +
                   ": no key was accepted (tried ssh-agent and ~/.ssh's keys): " + m_impl->error());
}

Result<CommandResult> SshSession::run(const std::vector<std::string>& argv,
                                      const std::string& stdinData) {
  return runRaw(shellCommand(argv), stdinData);
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
      ssh_channel_request_exec(ch, commandLine.c_str()) != SSH_OK)
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
