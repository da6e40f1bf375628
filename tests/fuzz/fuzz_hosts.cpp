// The saved hosts file and the job records beside it (protobuf text), each host
// checked as the Hosts dialog checks it, and a host as typed on the command line
// ("user@address:port" or a saved name) resolved against the file: the first line
// of the input is the typed host, the rest is the file.
#include "fuzz_input.h"
#include "remote/hosts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace netloom;
  const std::string text(fuzz::Input(data, size).rest());
  const size_t eol = text.find('\n');
  const std::string typed = text.substr(0, eol);
  const std::string file = eol == std::string::npos ? std::string() : text.substr(eol + 1);
  fuzz::MemFile hosts(file);
  if (!hosts.ok()) return 0;
  auto list = remote::loadHosts(hosts.path());
  remotepb::HostList saved = list ? *list : remotepb::HostList();
  for (const auto& h : saved.hosts()) {
    (void)remote::checkHost(h);
    (void)remote::hostTitle(h);
    (void)remote::hostSpec(h);
  }
  (void)remote::resolveHost(typed, saved);
  remotepb::JobRecord job;
  (void)remote::recordFromText(file, "fuzz-job", job);
  return 0;
}
