// The gradient buckets' kernels, the same on every backend: they hand the bucket to
// the run's communicator, which knows the device's memory (Gloo sums host memory).
#include "kernels/core/collectives.h"

#include "kernels/core/communicator.h"
#include "kernels/core/device.h"

namespace netloom {

void registerCollectiveKernels(KernelRegistry& r, DeviceKind device) {
  auto decline = [](const KernelSig& s) -> std::string {
    if (!s.comm) return "the run has no communicator";
    if (s.device && !s.device->hostAddressable() && !s.comm->sumsDeviceMemory())
      return s.comm->describe() + " sums host memory only";
    return {};
  };
  KernelImpl start{"collective.bucket_start", decline, [](const KernelSig& s) -> KernelFn {
                     Communicator* comm = s.comm;
                     std::string bucket = s.attrs->s("bucket");
                     return
                         [comm, bucket](const KernelIO& io) { comm->start(bucket, io.in, io.nin); };
                   }};
  start.anyLayout = true;  // summed element by element, whatever the layout
  r.add("BucketStart", device, std::move(start));
  KernelImpl wait{"collective.bucket_wait", decline, [](const KernelSig& s) -> KernelFn {
                    Communicator* comm = s.comm;
                    std::string bucket = s.attrs->s("bucket");
                    return [comm, bucket](const KernelIO&) { comm->wait(bucket); };
                  }};
  wait.anyLayout = true;
  r.add("BucketWait", device, std::move(wait));
}

}  // namespace netloom
