// A remote test's loopback host: an sshd the test starts on 127.0.0.1 in a folder of
// its own, and the saved host "loop" that reaches it and runs the real trainer there.
#pragma once

#include <QTemporaryDir>
#include <memory>
#include <string>

#include "job_helpers.h"
#include "sshd_fixture.h"

namespace netloom::testing {

class LoopbackHost {
 protected:
  remotepb::Host host() const {
    return m_sshd.savedHost(m_dir.filePath("known_hosts"), "loop", NETLOOM_TRAIN_EXE,
                            m_dir.filePath("work"));
  }

  std::unique_ptr<remote::SshSession> session(const remotepb::Host& h) { return testSession(h); }
  std::unique_ptr<remote::SshSession> session() { return session(host()); }

  static std::string errorOf(const Status& s) { return s ? "" : s.message(); }

  QTemporaryDir m_dir;
  SshdFixture m_sshd;
  QString m_skip;  // why there is no sshd here, or empty
};

}  // namespace netloom::testing
