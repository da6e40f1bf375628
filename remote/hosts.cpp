#include "remote/hosts.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/io/output_file.h"
#include "remote/slurm.h"

namespace netloom::remote {

namespace fs = std::filesystem;

namespace {

std::string baseDir(const char* xdgVar, const char* fallback) {
  const char* xdg = std::getenv(xdgVar);
  if (xdg && *xdg) return xdg;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/" + fallback;
}

// Folders of ours are user-only: the hosts file names keys and hosts.
Status makePrivateDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return makeError(dir + ": cannot create: " + ec.message());
  ::chmod(dir.c_str(), 0700);
  return {};
}

Result<std::string> readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(path + ": cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class LineErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first.empty())
      first = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) + ": " +
              message;
  }
  std::string first;
};

bool validJobId(const std::string& id) {
  return !id.empty() && id.size() < 64 && id[0] == 'j' &&
         id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
}

}  // namespace

std::string defaultHostsPath() {
  return baseDir("XDG_CONFIG_HOME", ".config") + "/netloom/hosts.txtpb";
}
std::string defaultJobsDir() {
  return baseDir("XDG_DATA_HOME", ".local/share") + "/netloom/jobs";
}

std::string recordToText(const google::protobuf::Message& m) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(m, &text);
  return text;
}

Status recordFromText(const std::string& text, const std::string& where,
                      google::protobuf::Message& m) {
  google::protobuf::TextFormat::Parser parser;
  LineErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &m)) return makeError(where + ": " + errors.first);
  return {};
}

Result<remotepb::HostList> loadHosts(const std::string& path) {
  remotepb::HostList list;
  if (!fs::exists(path)) return list;
  auto text = readText(path);
  if (!text) return text.error();
  if (Status s = recordFromText(*text, path, list); !s) return s.error();
  return list;
}

std::string checkHost(const remotepb::Host& h) {
  if (h.name().empty()) return "a host needs a name";
  if (h.name().find_first_of(" \t\n/@:'\"\\$`") != std::string::npos)
    return "host name '" + h.name() + "' may not hold spaces, quotes or any of / @ : $ `";
  std::string u, a;
  int p = 0;
  std::string addr = h.address();
  if (h.port() > 0) addr += ":" + std::to_string(h.port());
  if (!splitAddress((h.user().empty() ? "" : h.user() + "@") + addr, u, a, p))
    return h.name() + ": '" + h.address() + "' is not a host address";
  if (h.port() < 0 || h.port() > 65535)
    return h.name() + ": port " + std::to_string(h.port()) + " is out of range";
  if (!h.jump().empty() && !splitAddress(h.jump(), u, a, p))
    return h.name() + ": the jump host '" + h.jump() + "' is not [user@]host[:port]";
  if (!h.work_dir().empty() && h.work_dir()[0] != '/')
    return h.name() + ": the work directory must be an absolute path on the host";
  if (h.has_slurm())
    if (Status s = validateSlurm(h.slurm()); !s) return h.name() + ": " + s.message();
  return {};
}

Status saveHosts(const std::string& path, const remotepb::HostList& hosts) {
  std::vector<std::string> names;
  for (const auto& h : hosts.hosts()) {
    if (std::string why = checkHost(h); !why.empty()) return makeError(why);
    if (std::find(names.begin(), names.end(), h.name()) != names.end())
      return makeError("two hosts are named '" + h.name() + "'");
    names.push_back(h.name());
  }
  if (Status s = makePrivateDir(fs::path(path).parent_path().string()); !s) return s;
  return writeFileAtomic(
      path, "# NetLoom hosts: how to reach them; no secrets.\n" + recordToText(hosts), 0600);
}

Result<remotepb::Host> resolveHost(const std::string& text, const remotepb::HostList& saved) {
  for (const auto& h : saved.hosts())
    if (h.name() == text) return h;
  remotepb::Host h;
  std::string user, address;
  int port = 0;
  if (!splitAddress(text, user, address, port))
    return makeError("'" + text + "' is neither a saved host nor [user@]address[:port]");
  h.set_address(address);
  h.set_user(user);
  h.set_port(port);
  return h;
}

HostSpec hostSpec(const remotepb::Host& h) {
  HostSpec s;
  s.address = h.address();
  s.port = h.port();
  s.user = h.user();
  s.identity = h.identity();
  s.jump = h.jump();
  s.knownHosts = h.known_hosts();
  s.env.assign(h.env().begin(), h.env().end());
  return s;
}

std::string hostTitle(const remotepb::Host& h) {
  std::string label = hostSpec(h).label();
  return h.name().empty() ? label : h.name() + " (" + label + ")";
}

Status saveJobRecord(const std::string& jobsDir, const remotepb::JobRecord& job) {
  if (!validJobId(job.id())) return makeError("'" + job.id() + "' is not a job id");
  if (Status s = makePrivateDir(jobsDir); !s) return s;
  return writeFileAtomic(jobsDir + "/" + job.id() + ".txtpb", recordToText(job), 0600);
}

Result<remotepb::JobRecord> loadJobRecord(const std::string& jobsDir, const std::string& id) {
  if (!validJobId(id))
    return makeError("'" + id + "' is not a job id (they look like j20261203-145012-1a2b3c4d)");
  std::string path = jobsDir + "/" + id + ".txtpb";
  if (!fs::exists(path))
    return makeError("no job " + id + " was submitted from here (" + path + " is missing)");
  auto text = readText(path);
  if (!text) return text.error();
  remotepb::JobRecord job;
  if (Status s = recordFromText(*text, path, job); !s) return s.error();
  return job;
}

std::vector<remotepb::JobRecord> listJobRecords(const std::string& jobsDir) {
  std::vector<remotepb::JobRecord> jobs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(jobsDir, ec)) {
    std::string name = e.path().filename().string();
    if (name.size() < 7 || name.substr(name.size() - 6) != ".txtpb") continue;
    if (auto j = loadJobRecord(jobsDir, name.substr(0, name.size() - 6))) jobs.push_back(*j);
  }
  std::sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) { return a.id() < b.id(); });
  return jobs;
}

}  // namespace netloom::remote
