// Making a run's communicator: ranks meet at a rendezvous (a folder every rank can
// write, or memory for ranks that are threads of one process), then talk over Gloo's
// TCP transport. A single rank gets one that does nothing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/util/status.h"
#include "kernels/core/communicator.h"
#include "kernels/core/device.h"

namespace netloom {

class RendezvousStore;  // wraps a Gloo store

// A folder every rank sees (one host, or a shared filesystem): the job's own, as
// stale keys from another run would mislead it.
std::shared_ptr<RendezvousStore> fileRendezvous(const std::string& dir);
// For ranks that are threads of one process (tests).
std::shared_ptr<RendezvousStore> memoryRendezvous();
// Ranks on several hosts (tcp_store.h): rank 0 serves it at host:port (port 0: a
// free one, which it writes to `portFile` for whoever starts the other ranks), and
// every rank, rank 0 too, connects with the job's secret.
Result<std::shared_ptr<RendezvousStore>> tcpRendezvous(const std::string& host, int port, int rank,
                                                       const std::string& secret,
                                                       const std::string& portFile,
                                                       double timeoutSeconds);

struct RankOptions {
  int rank = 0, size = 1;
  // How long to wait for every rank to arrive, and for any collective to finish:
  // past it, the run fails naming what it waited for.
  double timeoutSeconds = 60;
  std::string hostname = "127.0.0.1";  // the address other ranks reach this one at
  // Where this rank trains: a GPU's ranks talk over NCCL, the CPU's over Gloo.
  Device* device = nullptr;
};

// Joins the ranks; the error names the ranks that never arrived.
Result<std::unique_ptr<Communicator>> connectRanks(const RankOptions& opts,
                                                   std::shared_ptr<RendezvousStore> store);

// Ranks that are threads of this process (`netloom-train --thread-ranks N`): one
// communicator per rank, each for its own thread, summing in shared memory with no
// copy through a transport. Each rank gets the same bits (slices summed in rank
// order). A rank whose communicator is destroyed has left: the others' collectives
// then throw CommError naming it, as do those that wait past `timeoutSeconds`.
std::vector<std::unique_ptr<Communicator>> threadRanks(int size, double timeoutSeconds);

// The ranks `members` (ranks of `all`, in the group's order) as a communicator of
// their own, rank k being members[k]: the transport's own group where it has one
// (Gloo connects it apart), else made of `all`'s messages with tags from `tag` up.
// Over every rank in order it is `all` itself (not owned). Every member makes it
// alike, at the same point.
std::unique_ptr<Communicator> subgroup(Communicator& all, std::vector<int> members, uint32_t tag);

// Tensor parallelism over `tensorParallel` ranks (a divisor of all.size()): rank r's
// tensor group is the run of ranks r/t·t .. r/t·t+t−1, which split the model between
// them; its data group the ranks holding the same parts (r mod t, r mod t + t, ...),
// which read different data and sum their split parameters' gradients.
struct TensorGroups {
  std::unique_ptr<Communicator> tensor, data;
};
TensorGroups tensorGroups(Communicator& all, int tensorParallel);

// Measures the link between `comm`'s ranks, which all call it at the same point:
// a message's latency from all-reduces of one float, the bandwidth from all-reduces
// of 1 MiB (a ring's 2(R−1) steps each), averaged over the ranks so that every rank
// has the same figures (and so plans alike). Sets and returns them.
LinkCost measureLink(Communicator& comm);

// One rank alone: every collective leaves its data as it is.
std::unique_ptr<Communicator> singleRank();

// `size` ranks to plan for (--explain): compiling against it shows the buckets; any
// collective throws.
std::unique_ptr<Communicator> planningRanks(int size);

}  // namespace netloom
