// On paper: how ResNet-50 would scale, data parallel, to 8 GPUs in one node (NVLink)
// and to 4 nodes of 8 (InfiniBand), from the compiled step's measured compute.
//
// The step NetLoom compiles for N ranks is run here on this CPU with a communicator
// that sums nothing, every kernel timed: that gives the forward, backward and update
// times, the gradient buckets (insertGradientBuckets, 1 MiB then 25 MiB) and when in
// the backward pass each bucket's last gradient is written. The shape of that
// timeline is scaled to a GPU's step time (an assumed single-GPU throughput), and
// each bucket's ring allreduce is modelled from its bytes and an assumed bus
// bandwidth and latency, one bucket after another on a communication stream that
// starts a bucket as soon as it is ready. A model, not a measurement: every
// assumption is printed with the figures.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine/compiler/compile.h"
#include "engine/graph/op.h"
#include "kernels/cpu/cpu_util.h"

using namespace netloom;

namespace {

// Sums nothing: the step runs as rank 0 of `size` would, alone.
class ComputeOnly : public Communicator {
 public:
  explicit ComputeOnly(int size) : m_size(size) {}
  int rank() const override { return 0; }
  int size() const override { return m_size; }
  std::string describe() const override { return "no communication (timing only)"; }
  void allreduce(float*, int64_t, bool) override {}
  void allreduce(double*, int64_t) override {}
  void broadcast(void*, int64_t, int) override {}
  void allgather(const void* in, void* out, int64_t bytes) override {
    std::memcpy(out, in, size_t(bytes));
  }
  void barrier() override {}
  void reduceScatter(const float* in, float* out, int64_t count) override {
    std::memcpy(out, in, size_t(count) * sizeof(float));
  }
  void alltoall(const void* in, void* out, int64_t bytes) override {
    std::memcpy(out, in, size_t(bytes));
  }
  void send(const void*, int64_t, int, uint32_t) override {}
  void recv(void*, int64_t, int, uint32_t) override {}
  void start(const std::string&, const TensorRef*, size_t) override {}
  void wait(const std::string&) override {}

 private:
  int m_size;
};

// ResNet-50 v1.5 (the stride on the 3x3 convolution of a downsampling bottleneck),
// as torchvision builds it: 25.6 million parameters.
proto::ModelDef resnet50(int image) {
  proto::ModelDef m;
  m.set_name("resnet50");
  auto node = [&](const std::string& name, const std::string& op, std::vector<std::string> inputs) {
    proto::NodeDef* n = m.add_nodes();
    n->set_name(name);
    n->set_op(op);
    for (auto& i : inputs) n->add_inputs(i);
    return n;
  };
  auto ints = [](proto::NodeDef* n, const char* key, std::vector<int64_t> v) {
    auto* values = (*n->mutable_attrs())[key].mutable_ints()->mutable_values();
    values->Add(v.begin(), v.end());
  };
  auto conv = [&](const std::string& name, const std::string& in, int out, int k, int stride) {
    proto::NodeDef* n = node(name, "Conv2d", {in});
    (*n->mutable_attrs())["out_channels"].set_i(out);
    (*n->mutable_attrs())["bias"].set_b(false);
    ints(n, "kernel_size", {k});
    ints(n, "stride", {stride});
    ints(n, "padding", {k / 2});
    node(name + "_bn", "BatchNorm", {name});
    return name + "_bn";
  };
  auto relu = [&](const std::string& in) {
    node(in + "_relu", "ReLU", {in});
    return in + "_relu";
  };
  proto::NodeDef* pixels = node("image", "Input", {});
  ints(pixels, "shape", {3, image, image});
  (*pixels->mutable_attrs())["field"].set_s("image");
  proto::NodeDef* label = node("label", "Input", {});
  (*label->mutable_attrs())["field"].set_s("label");
  (*label->mutable_attrs())["dtype"].set_s("int32");
  std::string x = relu(conv("stem", "image", 64, 7, 2));
  proto::NodeDef* pool = node("stem_pool", "MaxPool2d", {x});
  ints(pool, "kernel_size", {3});
  ints(pool, "stride", {2});
  ints(pool, "padding", {1});
  x = "stem_pool";
  const int blocks[4] = {3, 4, 6, 3};
  for (int layer = 0; layer < 4; ++layer) {
    const int width = 64 << layer;
    for (int b = 0; b < blocks[layer]; ++b) {
      const std::string p = "layer" + std::to_string(layer + 1) + "_" + std::to_string(b);
      const int stride = b == 0 && layer > 0 ? 2 : 1;
      std::string y = relu(conv(p + "_conv1", x, width, 1, 1));
      y = relu(conv(p + "_conv2", y, width, 3, stride));
      y = conv(p + "_conv3", y, width * 4, 1, 1);
      std::string skip = b == 0 ? conv(p + "_down", x, width * 4, 1, stride) : x;
      node(p + "_add", "Add", {y, skip});
      x = relu(p + "_add");
    }
  }
  node("gap", "GlobalAvgPool2d", {x});
  (*node("logits", "Linear", {"gap"})->mutable_attrs())["out_features"].set_i(1000);
  node("loss", "SoftmaxCrossEntropy", {"logits", "label"});
  m.add_outputs("logits");
  return m;
}

struct Timeline {
  double forward = 0, backward = 0, update = 0;  // seconds per step, on this CPU
  struct Bucket {
    int64_t bytes = 0;
    size_t tensors = 0;
    double ready = 0;  // seconds into the backward pass its last gradient is written
  };
  std::vector<Bucket> buckets;
  int64_t parameters = 0;
};

// The ring allreduce of `bytes` across `ranks`: each rank sends and receives
// 2(n-1)/n of the buffer over the slowest link (the bus bandwidth nccl-tests
// reports), plus a fixed start-up latency.
double ringSeconds(int64_t bytes, int ranks, double busGBs, double latencyUs) {
  return latencyUs * 1e-6 + 2.0 * (ranks - 1) / ranks * double(bytes) / (busGBs * 1e9);
}

struct Projection {
  double step1 = 0;      // one GPU: forward, backward, updates
  double stepN = 0;      // as built: every update after the last bucket's sum
  double perBucket = 0;  // each bucket's updates as soon as its own sum is done
  double oneBucket = 0;  // no overlap: one sum of everything after the backward pass
  double comm = 0;       // allreduce time per step, all buckets
  double exposed = 0;    // of which the backward pass did not hide (as built)
};

Projection project(const Timeline& t, double scale, int ranks, double busGBs, double latencyUs) {
  Projection p;
  const double fwd = t.forward * scale, bwd = t.backward * scale, upd = t.update * scale;
  p.step1 = fwd + bwd + upd;
  double end = 0;  // the communication stream, from the backward pass's start
  int64_t total = 0;
  std::vector<double> done;
  for (const auto& b : t.buckets) {
    double seconds = ringSeconds(b.bytes, ranks, busGBs, latencyUs);
    end = std::max(end, b.ready * scale) + seconds;
    p.comm += seconds;
    total += b.bytes;
    done.push_back(end);
  }
  p.exposed = std::max(0.0, end - bwd);
  p.stepN = fwd + std::max(bwd, end) + upd;
  // Updates bucket by bucket, each share of the update time in proportion to its bytes.
  double u = bwd;
  for (size_t k = 0; k < t.buckets.size(); ++k)
    u = std::max(u, done[k]) +
        upd * double(t.buckets[k].bytes) / double(std::max<int64_t>(total, 1));
  p.perBucket = fwd + u;
  p.oneBucket = fwd + bwd + ringSeconds(total, ranks, busGBs, latencyUs) + upd;
  return p;
}

double number(const char* flag, const char* v) {
  char* end = nullptr;
  double d = std::strtod(v, &end);
  if (!v[0] || *end || !(d > 0)) {
    std::fprintf(stderr, "%s needs a positive number, not '%s'\n", flag, v);
    std::exit(2);
  }
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  int batch = 4, image = 224, steps = 2, threads = int(std::thread::hardware_concurrency());
  double gpuRate = 384, gpuBatch = 128, nvlink = 100, ib = 40, nvlinkUs = 30, ibUs = 60;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "-h" || k == "--help" || i + 1 >= argc) {
      std::fprintf(stderr,
                   "usage: %s [--batch N] [--image S] [--steps N] [--threads T]\n"
                   "  [--gpu-rate IMAGES_PER_S] [--gpu-batch N] [--nvlink-gbs G] [--ib-gbs G]\n"
                   "  [--nvlink-latency-us U] [--ib-latency-us U]\n",
                   argv[0]);
      return 2;
    }
    const char* v = argv[++i];
    if (k == "--batch")
      batch = int(number(argv[i - 1], v));
    else if (k == "--image")
      image = int(number(argv[i - 1], v));
    else if (k == "--steps")
      steps = int(number(argv[i - 1], v));
    else if (k == "--threads")
      threads = int(number(argv[i - 1], v));
    else if (k == "--gpu-rate")
      gpuRate = number(argv[i - 1], v);
    else if (k == "--gpu-batch")
      gpuBatch = number(argv[i - 1], v);
    else if (k == "--nvlink-gbs")
      nvlink = number(argv[i - 1], v);
    else if (k == "--ib-gbs")
      ib = number(argv[i - 1], v);
    else if (k == "--nvlink-latency-us")
      nvlinkUs = number(argv[i - 1], v);
    else if (k == "--ib-latency-us")
      ibUs = number(argv[i - 1], v);
    else {
      std::fprintf(stderr, "unknown option '%s'\n", k.c_str());
      return 2;
    }
  }
  cpu::configureThreads(threads);
  ComputeOnly comm(8);
  CompileOptions o;
  o.batch = batch;
  o.optimizer.set_kind(proto::Optimizer::SGD);
  o.optimizer.set_momentum(0.9);
  o.comm = &comm;
  ParamStore store;
  auto compiled = compile(resnet50(image), o, store);
  if (!compiled) {
    std::fprintf(stderr, "%s\n", compiled.error().message.c_str());
    return 1;
  }
  Program& prog = **compiled;
  std::vector<float> pixels(size_t(batch) * 3 * image * image);
  uint32_t state = 1;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (float& v : pixels) v = float(next() >> 8) / float(1 << 24) - 0.5f;
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int32_t& l : labels) l = int32_t(next() % 1000);
  if (!prog.input("image") || !prog.input("label")) {
    std::fprintf(stderr, "the program has no image or label input\n");
    return 1;
  }
  std::memcpy(prog.input("image")->data, pixels.data(), pixels.size() * sizeof(float));
  std::memcpy(prog.input("label")->data, labels.data(), labels.size() * sizeof(int32_t));
  StepContext ctx{1, 0.01, 0, true};
  prog.run(ctx);  // the first step allocates and primes the kernels' caches
  std::vector<double> seconds(prog.steps.size(), 0.0);
  for (int s = 0; s < steps; ++s) {
    ctx.step = s + 2;
    prog.runProfiled(ctx, seconds);
  }

  Timeline t;
  for (const auto& e : store.entries())
    if (e->kind == ValueKind::Param) t.parameters += numel(e->desc.shape);
  bool backward = false;
  for (size_t i = 0; i < prog.steps.size(); ++i) {
    const Node& n = prog.graph.nodes[prog.steps[i].node];
    double s = seconds[i] / steps;
    if (n.op->role == OpRole::Optimizer) {
      t.update += s;
    } else if (n.op->name == "BucketStart") {
      Timeline::Bucket b;
      b.ready = t.backward;
      t.buckets.push_back(b);
    } else if (n.op->name != "BucketWait") {
      backward = backward || n.backward;
      (backward ? t.backward : t.forward) += s;
    }
  }
  if (t.buckets.size() != prog.buckets.size()) {
    std::fprintf(stderr, "the plan has %zu buckets, but %zu were started\n", prog.buckets.size(),
                 t.buckets.size());
    return 1;
  }
  int64_t gradientBytes = 0;
  for (size_t k = 0; k < t.buckets.size(); ++k) {
    t.buckets[k].bytes = prog.buckets[k].bytes;
    t.buckets[k].tensors = prog.buckets[k].tensors;
    gradientBytes += prog.buckets[k].bytes;
  }

  const double cpuStep = t.forward + t.backward + t.update;
  std::printf("ResNet-50 v1.5: %.2f M parameters, %.1f MiB of gradients, %zu buckets\n",
              double(t.parameters) / 1e6, double(gradientBytes) / (1 << 20), t.buckets.size());
  std::printf(
      "measured on this CPU (%d threads, batch %d at %dx%d, %d timed steps): "
      "forward %.0f ms, backward %.0f ms, updates %.0f ms per step\n",
      threads, batch, image, image, steps, t.forward * 1e3, t.backward * 1e3, t.update * 1e3);
  std::printf("\n%-7s %8s %8s %11s %s\n", "bucket", "tensors", "MiB", "ready at", "backward left");
  for (size_t k = 0; k < t.buckets.size(); ++k) {
    const auto& b = t.buckets[k];
    std::printf("%-7zu %8zu %8.2f %10.1f%% %12.1f%%\n", k, b.tensors, double(b.bytes) / (1 << 20),
                100 * b.ready / t.backward, 100 * (1 - b.ready / t.backward));
  }
  const double gpuStep = gpuBatch / gpuRate;
  std::printf(
      "\nassumed: one GPU trains %.0f images/s at batch %.0f (%.0f ms a step), the CPU "
      "timeline's shape scaled to it;\n"
      "  NVLink within a node: ring bus bandwidth %.0f GB/s, %.0f us per allreduce;\n"
      "  InfiniBand between nodes: one 400 Gb/s port per node, %.0f GB/s bus bandwidth "
      "for a ring that crosses it, %.0f us per allreduce;\n"
      "  one communication stream, a bucket's sum starting when both it and the one "
      "before are ready; NCCL's use of SMs and data loading not modelled.\n",
      gpuRate, gpuBatch, gpuStep * 1e3, nvlink, nvlinkUs, ib, ibUs);
  std::printf("\n%-18s %5s %9s %9s %10s %8s %11s %11s\n", "setup", "GPUs", "comm ms", "exposed",
              "efficiency", "scaling", "per-bucket", "no overlap");
  struct Setup {
    const char* name;
    int ranks;
    double gbs, us, rateFactor;
  };
  const Setup setups[] = {{"1 node, NVLink", 8, nvlink, nvlinkUs, 1},
                          {"4 nodes x 8, IB", 32, ib, ibUs, 1},
                          {"1 node, GPU 3x", 8, nvlink, nvlinkUs, 3},
                          {"4x8, GPU 3x", 32, ib, ibUs, 3}};
  for (const Setup& s : setups) {
    Projection p = project(t, gpuStep / s.rateFactor / cpuStep, s.ranks, s.gbs, s.us);
    std::printf("%-18s %5d %9.1f %8.1fms %9.1f%% %7.2fx %10.1f%% %10.1f%%\n", s.name, s.ranks,
                p.comm * 1e3, p.exposed * 1e3, 100 * p.step1 / p.stepN, s.ranks * p.step1 / p.stepN,
                100 * p.step1 / p.perBucket, 100 * p.step1 / p.oneBucket);
  }
  std::printf(
      "\nefficiency: one GPU's step time over the step with communication, as built "
      "(the updates wait for every bucket);\nper-bucket: each bucket's updates start "
      "once its own sum is done; no overlap: one sum of every gradient after the "
      "backward pass.\nanchor: OneFlow's published ResNet-50 FP32 result, 31.21x on "
      "32 V100s (97.5%%).\n");
  return 0;
}
