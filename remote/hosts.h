// Saved hosts and the local job registry.
//
// Hosts live in <config>/netloom/hosts.txtpb (config: $XDG_CONFIG_HOME, else
// ~/.config), written atomically with user-only permissions; the file holds how
// to reach a host, never a password or passphrase. Every submitted job leaves a
// record in <data>/netloom/jobs/<id>.txtpb (data: $XDG_DATA_HOME, else
// ~/.local/share) so `netloom-job attach ID` needs no --host.
#pragma once

#include <string>
#include <vector>

#include "engine/util/status.h"
#include "remote/remote.pb.h"
#include "remote/ssh.h"

namespace netloom::remote {

std::string defaultHostsPath();
std::string defaultJobsDir();

// A missing file is an empty list; a malformed one is an error naming the line.
Result<remotepb::HostList> loadHosts(const std::string& path);
Status saveHosts(const std::string& path, const remotepb::HostList& hosts);
// Problems of one host entry, for the dialog and the CLI: empty when it is usable.
std::string checkHost(const remotepb::Host& h);

// `text` as a saved host's name, else as "[user@]address[:port]".
Result<remotepb::Host> resolveHost(const std::string& text, const remotepb::HostList& saved);
// How to connect: the host's settings as a HostSpec.
HostSpec hostSpec(const remotepb::Host& h);
// "name (user@address:port)", or the address alone for an unsaved host.
std::string hostTitle(const remotepb::Host& h);

Status saveJobRecord(const std::string& jobsDir, const remotepb::JobRecord& job);
Result<remotepb::JobRecord> loadJobRecord(const std::string& jobsDir, const std::string& id);
std::vector<remotepb::JobRecord> listJobRecords(const std::string& jobsDir);

// Text format of a record, and back (the errors name `where` and the line).
std::string recordToText(const google::protobuf::Message& m);
Status recordFromText(const std::string& text, const std::string& where,
                      google::protobuf::Message& m);

}  // namespace netloom::remote
