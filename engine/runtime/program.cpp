#include "engine/runtime/program.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <utility>

#include "engine/util/memory_budget.h"

namespace netloom {

bool Arena::resize(Device& device, int64_t bytes) {
  m_buffer.reset();
  m_buffer = DeviceBuffer(device, std::max<int64_t>(bytes, 64));
  m_size = m_buffer.ok() ? bytes : 0;
  return m_buffer.ok();
}

float Program::scalar(ValueId v) const {
  if (device->hostAddressable()) return refs[v].f32()[0];
  float value = 0;
  device->copyToHost(&value, refs[v].data, sizeof(float));
  device->synchronize();
  return value;
}

std::vector<float> Program::read(ValueId v) const {
  return readAsFloats(*device, refs[v].data, refs[v].dtype, refs[v].numel());
}

namespace {

static_assert(sizeof(DeviceStepValues) <= 64, "written by Device::writeValues");

void writeStepValues(const Program& p, const StepContext& ctx) {
  if (!p.stepValues.ok()) return;
  DeviceStepValues v{ctx.step, ctx.lr, ctx.seed, ctx.lossWeight};
  p.device->writeValues(p.stepValues.data(), &v, sizeof v);
}

}  // namespace

const char* precisionName(Precision p) {
  return p == Precision::BF16 ? "bf16" : p == Precision::F16 ? "fp16" : "fp32";
}

Result<Precision> parsePrecision(const std::string& s) {
  if (s.empty() || s == "fp32") return Precision::F32;
  if (s == "bf16") return Precision::BF16;
  if (s == "fp16") return Precision::F16;
  return makeError("train.precision: '" + s + "' is not a precision (fp32, bf16, fp16)");
}

std::vector<TensorRef> Program::updateGradients() const {
  std::vector<TensorRef> grads;
  if (lossScale != kNoValue) return grads;
  for (size_t i = updatesBegin; i < steps.size(); ++i) {
    const Node& n = graph.nodes[steps[i].node];
    if (n.op->role == OpRole::Optimizer && steps[i].in.size() >= 2)
      grads.push_back(steps[i].in[1]);  // (param, grad, state...)
  }
  return grads;
}

CollectiveLane::CollectiveLane() : m_thread([this] { work(); }) {}

CollectiveLane::~CollectiveLane() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_cv.notify_all();
  m_thread.join();
}

uint64_t CollectiveLane::submit(std::function<void()> fn) {
  std::lock_guard lock(m_mutex);
  m_jobs.push_back(std::move(fn));
  m_cv.notify_all();
  return ++m_submitted;
}

void CollectiveLane::wait(uint64_t ticket) {
  std::unique_lock lock(m_mutex);
  m_cv.wait(lock, [&] { return m_done >= ticket; });
  if (m_error) std::rethrow_exception(std::exchange(m_error, nullptr));
}

void CollectiveLane::drain() noexcept {
  std::unique_lock lock(m_mutex);
  m_cv.wait(lock, [&] { return m_done >= m_submitted; });
  m_error = nullptr;
}

void CollectiveLane::work() {
  std::unique_lock lock(m_mutex);
  for (;;) {
    m_cv.wait(lock, [&] { return m_stop || !m_jobs.empty(); });
    if (m_jobs.empty()) return;
    std::function<void()> job = std::move(m_jobs.front());
    m_jobs.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      if (!m_error) job();  // after a failure the rest are skipped: the step fails
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !m_error) m_error = error;
    ++m_done;
    m_cv.notify_all();
  }
}

void Program::issue(const StepContext& ctx, size_t begin, size_t end, bool guarded) const {
  auto* values = static_cast<const DeviceStepValues*>(stepValues.data());
  float* flag = guarded ? guard.f32() : nullptr;
  auto check = [&] { device->checkFinite(refs[loss], updateGradients(), flag); };
  std::vector<std::pair<size_t, uint64_t>> moving;  // (joinAt, ticket) of boxings in flight
  struct Drain {  // a step that throws leaves no boxing reading its memory
    CollectiveLane* lane;
    ~Drain() {
      if (lane) lane->drain();
    }
  } drain{nullptr};
  for (size_t i = begin; i < end; ++i) {
    for (auto it = moving.begin(); it != moving.end();)
      if (it->first <= i) {
        lane->wait(it->second);
        it = moving.erase(it);
      } else {
        ++it;
      }
    if (flag && i == updatesBegin) check();
    const PlanStep& s = steps[i];
    KernelIO io{s.in.data(),      s.out.data(), s.in.size(),
                s.out.size(),     &ctx,         s.workspace,
                s.workspaceBytes, values,       i >= updatesBegin ? flag : nullptr};
    if (s.fn && s.joinAt > i) {  // every boxing goes there, so they keep their order
      if (!lane) lane = std::make_unique<CollectiveLane>();
      drain.lane = lane.get();
      moving.push_back({s.joinAt, lane->submit([&s, io] { s.fn(io); })});
    } else if (s.fn) {
      s.fn(io);  // null: done by its group's launch
    }
  }
  if (drain.lane) lane->waitAll();
  drain.lane = nullptr;
  if (flag && updatesBegin >= end) check();  // no updates: the check still tells the host
}

void Program::runRecorded(const StepContext& ctx, size_t begin, size_t end, bool guarded) const {
  end = std::min(end, steps.size());
  guarded = guarded && guard.ok();
  if (device->hostAddressable() || !graphs || begin >= end) {
    writeStepValues(*this, ctx);
    return issue(ctx, begin, end, guarded);
  }
  Recorded& r = recorded[{begin, end, ctx.training, guarded}];
  if (!r.replay && r.runs == 1 && r.why.empty()) {
    // Recorded on its second run: the first has done what libraries do only once
    // (module loading, their own allocations), which a recording may not hold.
    writeStepValues(*this, ctx);
    StepContext fixed = ctx;
    r.replay = device->capture([&] { issue(fixed, begin, end, guarded); }, r.why);
    if (!r.replay && r.why.empty()) r.why = "the device recorded nothing";
  }
  r.runs += 1;
  writeStepValues(*this, ctx);
  if (r.replay)
    r.replay->launch();
  else
    issue(ctx, begin, end, guarded);
}

std::vector<std::string> Program::takeRecordingProblems() const {
  std::vector<std::string> out;
  for (auto& [range, r] : recorded)
    if (!r.why.empty() && !r.reported) {
      r.reported = true;
      if (std::find(out.begin(), out.end(), r.why) == out.end()) out.push_back(r.why);
    }
  return out;
}

void Program::run(const StepContext& ctx, size_t begin, size_t end) const {
  writeStepValues(*this, ctx);
  issue(ctx, begin, std::min(end, steps.size()), false);
}

void Program::runProfiled(const StepContext& ctx, std::vector<double>& seconds) const {
  seconds.resize(steps.size(), 0.0);
  writeStepValues(*this, ctx);
  for (size_t i = 0; i < steps.size(); ++i) {
    const PlanStep& s = steps[i];
    KernelIO io{s.in.data(),
                s.out.data(),
                s.in.size(),
                s.out.size(),
                &ctx,
                s.workspace,
                s.workspaceBytes,
                static_cast<const DeviceStepValues*>(stepValues.data())};
    auto t0 = std::chrono::steady_clock::now();
    if (s.fn) s.fn(io);     // null: done by its group's launch
    device->synchronize();  // a launch's time, not the time to queue it
    seconds[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

const TensorRef* Program::input(const std::string& field) const {
  auto it = graph.inputsByField.find(field);
  if (it == graph.inputsByField.end() || !refs[it->second].data) return nullptr;
  return &refs[it->second];
}

namespace {
std::string bytesText(int64_t b) {
  std::ostringstream o;
  o.precision(3);
  if (b >= (1 << 20))
    o << double(b) / double(1 << 20) << " MiB";
  else if (b >= 1024)
    o << double(b) / 1024.0 << " KiB";
  else
    o << b << " B";
  return o.str();
}
// The pass manager's pipelines, then what each pass that ran changed.
void printPasses(std::ostream& o, const std::vector<Program::PipelineEntry>& pipeline,
                 const std::vector<Program::PassRecord>& passes) {
  if (!pipeline.empty()) {
    o << "  pipeline (pass: analyses it needs / keeps valid; * --disable-pass can turn it off):\n";
    std::string current;
    for (const Program::PipelineEntry& e : pipeline) {
      if (e.pipeline != current) o << "    " << (current = e.pipeline) << ":\n";
      const std::string name = e.name + (e.optional ? "*" : "");
      o << "      " << name << std::string(name.size() < 18 ? 18 - name.size() : 1, ' ') << "needs "
        << e.needs << "; keeps " << e.preserves << "; " << e.status << "\n";
    }
  }
  if (!passes.empty()) {
    o << "  passes (nodes before -> after: what changed):\n";
    for (const Program::PassRecord& p : passes)
      o << "    " << p.name << std::string(p.name.size() < 17 ? 17 - p.name.size() : 1, ' ')
        << p.nodesBefore << " -> " << p.nodesAfter << ": " << p.change << "\n";
  }
}
}  // namespace

namespace {

// --explain's line on mixed precision: what autocast rounds, the loss scaling, and the
// tensors stored in bf16.
std::string describePrecision(const Program& p) {
  std::ostringstream o;
  o << "  precision: " << precisionName(p.precision) << " autocast on " << p.autocast.size()
    << " matrix op" << (p.autocast.size() == 1 ? "" : "s")
    << " (16-bit inputs and outputs, float accumulation and master weights)";
  if (p.lossScale != kNoValue)
    o << "; dynamic loss scaling: a step whose scaled gradients are not finite is skipped "
         "and halves the scale";
  int64_t half = 0, halfBytes = 0;
  for (const Value& v : p.graph.values)
    if (v.kind == ValueKind::Activation && v.desc.dtype == DType::BF16 && v.producer >= 0)
      ++half, halfBytes += bytesOf(v.desc);
  if (half > 0)
    o << "; " << half << " tensor" << (half == 1 ? "" : "s") << " between ops stored in bf16 ("
      << formatBytes(halfBytes) << ")";
  o << "\n";
  return o.str();
}

}  // namespace

std::string Program::explain() const {
  std::ostringstream o;
  o << (training ? "training" : "evaluation") << " plan on " << device->id().toString()
    << ", batch " << batch << ", " << steps.size() << " kernel launches\n";
  if (!device->hostAddressable()) {
    o << "  launch: ";
    std::string failed;
    for (const auto& [range, r] : recorded)
      if (!r.replay) failed = r.why;
    if (!graphs)
      o << "every kernel issued each step (--no-cuda-graphs)\n";
    else if (!failed.empty())
      o << "every kernel issued each step; the step could not be recorded: " << failed << "\n";
    else
      o << "each step issued launch by launch once, then recorded as a CUDA Graph and "
           "replayed, one launch per step (its check for non-finite values included)\n";
  }
  printPasses(o, pipeline, passes);
  for (const std::string& f : fusions) o << "  fused: " << f << "\n";
  for (const std::string& f : chains) o << "  chained: " << f << "\n";
  if (precision != Precision::F32) o << describePrecision(*this);
  for (const Bucket& b : buckets)
    o << "  gradients summed across the ranks: " << b.name << ", " << b.tensors << " tensor"
      << (b.tensors == 1 ? "" : "s") << ", " << formatBytes(b.bytes)
      << ", started as its last gradient is written\n";
  if (blockedTensors > 0 || packedWeights > 0)
    o << "  layouts: " << blockedTensors << " activations in nChw16c, " << reorders
      << " reorders to and from nchw; " << packedWeights
      << " convolution weights stored packed (with their gradients and optimizer state)\n";
  if (!overwrote.empty())
    o << "  in place: " << overwrote.size() << " output" << (overwrote.size() == 1 ? "" : "s")
      << " written over an input read for the last time\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const PlanStep& s = steps[i];
    const Node& n = graph.nodes[s.node];
    o << "  [" << i << "] " << n.name << " (" << n.op->name << ") -> " << s.kernel;
    if (s.groupEnd > i + 1)
      o << " (one multi-tensor launch for steps " << i << " to " << s.groupEnd - 1 << ")";
    else if (!s.fn)
      o << " (in the multi-tensor launch above)";
    if (s.alone) o << " (one thread)";
    if (s.detail) o << " [" << s.detail() << "]";
    if (!s.declined.empty()) o << "  {declined: " << s.declined << "}";
    o << "\n       in:";
    auto tensor = [&](ValueId v) {
      const TensorDesc& d = graph.values[v].desc;
      o << " " << graph.values[v].name << "[" << shapeToString(d.shape);
      if (d.layout != Layout::Plain) o << " " << layoutName(d);
      o << "]";
    };
    for (ValueId v : n.inputs) tensor(v);
    o << "\n       out:";
    for (ValueId v : n.outputs) {
      tensor(v);
      if (graph.values[v].kind == ValueKind::Activation && refs[v].data)
        o << "@" << (static_cast<char*>(refs[v].data) - arena.data());
      if (auto it = overwrote.find(v); it != overwrote.end())
        o << " (in place of " << graph.values[it->second].name << ")";
    }
    o << "\n";
  }
  o << "memory: arena " << bytesText(arenaBytes) << " (" << arenaBytes << " bytes) vs naive "
    << bytesText(naiveBytes) << " (" << naiveBytes << " bytes)";
  if (naiveBytes > 0)
    o << ", " << (100.0 * double(arenaBytes) / double(naiveBytes)) << "% of naive";
  o << "\n";
  return o.str();
}

}  // namespace netloom
