// netloom-train's command line: what it asks for, read with CLI11. Numbers are whole
// decimal numbers in the option's range, and a bad one is refused naming the option;
// --help is generated from the same declarations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/cli/convert.h"
#include "engine/train/trainer.h"

namespace netloom::cli {

struct TrainArgs {
  std::string project, events, summaryJson, devices;
  int ranks = 0;                     // --ranks: 0 the project's
  int threadRanks = 0;               // --thread-ranks
  int rank = -1, worldSize = 0;      // a worker of a --ranks job (set by its launcher)
  std::string rendezvous, rankLogs;  // the job's rendezvous (folder, tcp://); where ranks 1.. log
  std::string rankAddress;           // where the other ranks reach this one (several hosts)
  double rankTimeout = 0;            // 0: train.distributed.timeout_s, else 60
  bool explain = false, quiet = false, summary = false;
  bool version = false, listDevices = false, peak = false;
  ConvertArgs convert;  // a conversion instead of training, where it names one
  TrainOptions opts;
  // --generate: text from a trained language model instead of training.
  std::optional<std::string> generate;
  std::string from;
  int64_t maxTokens = 200;
  double temperature = 1.0;
  int topK = 0;
  // --sweep: the project's sweep instead of one run.
  bool sweep = false;
  int parallel = 0;  // --parallel: trials at once (over sweep.parallel)
  std::string sweepJson, sweepDir;
  std::string target;  // --target: local, or hosts A,B,... (through netloom-job sweep)
};

// Reads a whole decimal integer in [lo, hi] into `out`; anything else (a sign,
// trailing text, a value the field cannot hold) is an error naming the option, never
// a wrap. Empty on success.
std::string parseWholeNumber(const std::string& option, const std::string& text, uint64_t lo,
                             uint64_t hi, uint64_t& out);

// Parses the command line into `a`. An exit code where the program ends here: 0 after
// --help, 2 with the reason (and the usage, for an option it does not know) on stderr.
std::optional<int> parseTrainArgs(int argc, char** argv, TrainArgs& a);

}  // namespace netloom::cli
