// netloom-job: remote training jobs from a terminal, on the same library as the IDE.
//   netloom-job submit --host H [--wait] PROJECT.nlproj
//   netloom-job attach --host H DIR     (prints progress until the job ends)
//   netloom-job cancel --host H DIR     (SIGKILL to the job's process group)
//   netloom-job stop   --host H DIR     (ends cleanly after the current step)
// H is [user@]address[:port]. Keys come from --identity FILE, ssh-agent or ~/.ssh;
// host keys from ~/.ssh/known_hosts (or --known-hosts FILE). An unknown host key
// is shown with its fingerprint and accepted only when the user types "yes"; a
// changed one is refused.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "engine/cli/progress.h"
#include "engine/io/project_file.h"
#include "remote/jobs.h"

using namespace netloom;
using namespace netloom::remote;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: netloom-job submit --host H [--wait] [--trainer PATH] [--workdir DIR] "
               "PROJECT.nlproj\n"
               "       netloom-job attach|stop|cancel --host H JOBDIR\n"
               "options: --identity FILE  --known-hosts FILE  --trainer PATH  --workdir DIR\n");
  return 2;
}

bool parseHost(const std::string& text, HostSpec& h) {
  std::string rest = text;
  if (auto at = rest.find('@'); at != std::string::npos)
    h.user = rest.substr(0, at), rest.erase(0, at + 1);
  if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    h.port = std::atoi(rest.c_str() + colon + 1);
    rest.erase(colon);
  }
  h.address = rest;
  return !h.address.empty() && h.port > 0 && h.port < 65536;
}

bool askUnknown(const HostKey& k, const HostSpec& h) {
  std::fprintf(stderr,
               "The authenticity of host %s can't be established.\n%s key fingerprint is %s.\n"
               "Type 'yes' to trust it and continue: ",
               h.label().c_str(), k.type.c_str(), k.fingerprint.c_str());
  std::string answer;
  std::getline(std::cin, answer);
  return answer == "yes";
}

// Streams a job's events to the progress printer until it ends, reconnecting
// with back-off; 0 when it finished, 1 when it failed or could not be followed.
int follow(const HostSpec& host, const Job& job, std::unique_ptr<SshSession> s) {
  ProgressPrinter progress(stderr);
  int64_t offset = 0;
  int backoffMs = 200;
  for (;;) {
    if (!s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(backoffMs));
      backoffMs = std::min(backoffMs * 2, 10000);
      auto again = openSession(host, nullptr);  // the key is known by now
      if (again) s = std::move(*again), backoffMs = 200;
      continue;
    }
    auto chunk = readJobEvents(*s, job, offset);
    if (!chunk) {
      std::fprintf(stderr, "netloom-job: %s; reconnecting\n", chunk.error().message.c_str());
      s.reset();
      continue;
    }
    offset = chunk->events.nextOffset;
    for (const auto& e : chunk->events.events) {
      progress.onEvent(e);
      if (e.has_finished()) return 0;
      if (e.has_failed()) {
        std::fprintf(stderr, "netloom-job: the job failed: %s\n", e.failed().message().c_str());
        return 1;
      }
    }
    if (chunk->events.events.empty()) {
      auto alive = jobRunning(*s, job);
      if (alive && !*alive) {
        std::fprintf(stderr, "netloom-job: the job's process is gone (killed?)\n");
        return 1;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string verb = argv[1];
  HostSpec host;
  JobSpec spec;
  bool wait = false, haveHost = false;
  std::string target;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--host") {
      if (!value(v) || !parseHost(v, host)) return usage();
      haveHost = true;
    } else if (a == "--identity") {
      if (!value(host.identity)) return usage();
    } else if (a == "--known-hosts") {
      if (!value(host.knownHosts)) return usage();
    } else if (a == "--trainer") {
      if (!value(spec.trainer)) return usage();
    } else if (a == "--workdir") {
      if (!value(spec.workDir)) return usage();
    } else if (a == "--wait") {
      wait = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "netloom-job: unknown option '%s'\n", a.c_str());
      return usage();
    } else {
      target = a;
    }
  }
  if (!haveHost || target.empty()) return usage();
  auto session = openSession(host, [&](const HostKey& k) { return askUnknown(k, host); });
  if (!session) {
    std::fprintf(stderr, "netloom-job: %s\n", session.error().message.c_str());
    return 1;
  }
  if (verb == "submit") {
    auto project = loadProject(target);
    if (!project) {
      std::fprintf(stderr, "netloom-job: %s\n", project.error().message.c_str());
      return 1;
    }
    auto job = submitJob(**session, *project, spec);
    if (!job) {
      std::fprintf(stderr, "netloom-job: %s\n", job.error().message.c_str());
      return 1;
    }
    std::printf("%s %s\n", job->id.c_str(), job->dir.c_str());
    std::fflush(stdout);
    return wait ? follow(host, *job, std::move(*session)) : 0;
  }
  Job job;
  job.dir = target;
  auto pid = (*session)->run({"cat", target + "/pid"});
  if (!pid || pid->exitStatus != 0) {
    std::fprintf(stderr, "netloom-job: %s: no job there\n", target.c_str());
    return 1;
  }
  job.pid = std::atol(pid->out.c_str());
  if (verb == "attach") return follow(host, job, std::move(*session));
  if (verb == "cancel" || verb == "stop") {
    if (Status s = signalJob(**session, job, verb == "cancel" ? "KILL" : "TERM"); !s) {
      std::fprintf(stderr, "netloom-job: %s\n", s.message().c_str());
      return 1;
    }
    return 0;
  }
  return usage();
}
