// netloom-train --sweep: the project's sweep run on this computer, a table row
// printed as each trial ends and the best said at the end.
#pragma once

#include <atomic>

#include "engine/cli/train_args.h"
#include "engine/proto/project.pb.h"

namespace netloom::cli {

// The exit code: 0 when some trial gave an objective, 1 when none did, 2 for a sweep
// the project cannot run (the reason on stderr, naming the field).
int runSweepCommand(TrainArgs& a, const proto::Project& project, const std::atomic<bool>& stop);

}  // namespace netloom::cli
