// Writes each harness's seed corpus: make_seeds SOURCE_DIR FASHION_DIR OUT_DIR puts
// OUT_DIR/<harness>/* from the example projects, small files made here with the
// engine's own writers, and the first images of Fashion-MNIST where it is installed.
// Seeds are made at run time so that no corpus is kept in the repository.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

#include "engine/io/event_stream.h"
#include "engine/io/safetensors.h"

namespace fs = std::filesystem;
using namespace netloom;

namespace {

bool put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  return bool(out);
}

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string be32(uint32_t v) {
  return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

// The IDX harness's input: two bytes of images length, the images, the labels.
std::string idxInput(const std::string& images, const std::string& labels) {
  return std::string{char(images.size() >> 8), char(images.size() & 0xff)} +
         images.substr(0, 0xffff) + labels;
}

std::string idxImages(uint32_t n, uint32_t rows, uint32_t cols) {
  std::string s = be32(0x803) + be32(n) + be32(rows) + be32(cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i) s += char(i * 37);
  return s;
}

std::string idxLabels(uint32_t n) {
  std::string s = be32(0x801) + be32(n);
  for (uint32_t i = 0; i < n; ++i) s += char(i % 10);
  return s;
}

std::string gzip(const std::string& bytes) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out(deflateBound(&z, uLong(bytes.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = uInt(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// The first `bytes` of a gzip file, decompressed.
std::string gunzipHead(const fs::path& p, size_t bytes) {
  gzFile f = gzopen(p.c_str(), "rb");
  if (!f) return {};
  std::string s(bytes, '\0');
  int got = gzread(f, s.data(), unsigned(bytes));
  gzclose(f);
  s.resize(got > 0 ? size_t(got) : 0);
  return s;
}

void idxSeeds(const fs::path& fashion, const fs::path& out) {
  put(out, "small", idxInput(idxImages(3, 4, 4), idxLabels(3)));
  put(out, "one-by-one", idxInput(idxImages(1, 1, 1), idxLabels(1)));
  put(out, "gzip", idxInput(gzip(idxImages(2, 5, 3)), gzip(idxLabels(2))));
  put(out, "count-mismatch", idxInput(idxImages(2, 2, 2), idxLabels(3)));
  // Fashion-MNIST's own headers and first images: 20 images of 28×28 fit the 64 KiB
  // the harness allows the images, their count patched to match.
  std::string images = gunzipHead(fashion / "train-images-idx3-ubyte.gz", 16 + 20 * 784);
  std::string labels = gunzipHead(fashion / "train-labels-idx1-ubyte.gz", 8 + 20);
  if (images.size() == 16 + 20 * 784 && labels.size() == 8 + 20) {
    images.replace(4, 4, be32(20));
    labels.replace(4, 4, be32(20));
    put(out, "fashion", idxInput(images, labels));
    put(out, "fashion-gzip", idxInput(gzip(images), gzip(labels)));
  }
}

// The CSV harness's first byte: bit 0 header, bits 1-2 the delimiter (, ; tab space),
// bits 3-5 the label column ("", "label", "0", "1", ...).
void csvSeeds(const fs::path& out) {
  put(out, "header-by-name", std::string(1, char(1 | 1 << 3)) + "x,y,label\n0.5,1,0\n-2,3e4,1\n");
  put(out, "no-header-first", std::string(1, char(0 | 2 << 3)) + "1,0.25,0.5\n0,1,2\n");
  put(out, "semicolon", std::string(1, char(1 | 1 << 1 | 1 << 3)) + "a;label\n1;2\n3;0\n");
  put(out, "tab-quoted",
      std::string(1, char(1 | 2 << 1 | 1 << 3)) + "\"a\"\tlabel\n\"1.5\"\t1\n2\t0\n");
  put(out, "crlf", std::string(1, char(1 | 1 << 3)) + "a,label\r\n1,0\r\n2,1\r\n");
}

void safetensorsSeeds(const fs::path& out) {
  const fs::path tmp = out / "tmp.safetensors";
  NamedTensor w{"fc1.weight", DType::F32, {2, 3}, std::vector<uint8_t>(24, 0x3f)};
  NamedTensor b{"fc1.bias", DType::F32, {2}, std::vector<uint8_t>(8, 0)};
  NamedTensor n{"bn.num_batches_tracked", DType::I64, {}, std::vector<uint8_t>(8, 1)};
  NamedTensor u{"bytes", DType::U8, {5}, {1, 2, 3, 4, 5}};
  struct Seed {
    const char* name;
    std::vector<NamedTensor> tensors;
    std::map<std::string, std::string> metadata;
  };
  fs::create_directories(out);
  for (const Seed& s : {Seed{"one", {w}, {}}, Seed{"several", {w, b, n, u}, {{"format", "pt"}}},
                        Seed{"empty", {}, {}}}) {
    if (writeSafetensors(tmp.string(), s.tensors, s.metadata)) put(out, s.name, readFile(tmp));
  }
  fs::remove(tmp);
}

// The events harness's first byte is the offset a follower resumes from.
void eventSeeds(const fs::path& out) {
  proto::TrainEvent started, step, epoch, log, checkpoint, finished, failed;
  started.mutable_run_started()->set_project_name("spirals");
  started.mutable_run_started()->set_total_steps(94);
  step.mutable_step()->set_step(1);
  step.mutable_step()->set_loss(1.1);
  (*step.mutable_step()->mutable_metrics())["acc"] = 0.5;
  epoch.mutable_epoch()->set_epoch(1);
  (*epoch.mutable_epoch()->mutable_train_metrics())["acc"] = 0.6;
  log.mutable_log()->set_text("early stopping");
  log.mutable_log()->set_level(proto::Log::WARNING);
  checkpoint.mutable_checkpoint()->set_step(47);
  checkpoint.mutable_checkpoint()->set_path("checkpoints/step-000000047");
  finished.mutable_finished()->set_steps(94);
  failed.mutable_failed()->set_message("the loss became NaN at step 3");
  std::string all;
  for (const auto* e : {&started, &step, &epoch, &log, &checkpoint, &finished})
    all += encodeEvent(*e);
  put(out, "run", std::string(1, '\0') + all);
  put(out, "failed", std::string(1, '\0') + encodeEvent(started) + encodeEvent(failed));
  put(out, "torn", std::string(1, char(3)) + all.substr(0, all.size() - 3));
}

void hostSeeds(const fs::path& out) {
  const std::string host =
      "hosts {\n  name: \"gpu1\"\n  address: \"10.0.0.5\"\n  port: 2222\n  user: \"ann\"\n"
      "  identity: \"/home/ann/.ssh/id_ed25519\"\n  jump: \"ann@gate:22\"\n"
      "  trainer: \"/opt/netloom/bin/netloom-train\"\n  work_dir: \"/scratch/ann\"\n"
      "  env: \"module load cuda\"\n  prefer_host_data: true\n}\n";
  put(out, "saved-name", "gpu1\n" + host);
  put(out, "typed", "bob@[::1]:2200\n" + host + "hosts { name: \"b\" address: \"b.example\" }\n");
  put(out, "job-record",
      "gpu1\nid: \"20261203-141503-ab12\"\nhost { name: \"gpu1\" address: \"h\" }\n"
      "dir: \"/scratch/ann/jobs/20261203-141503-ab12\"\npid: 4242\nargs: \"--devices\"\n"
      "data { local_path: \"a\" remote_path: \"b\" sha256: \"00\" bytes: 3 uploaded: true }\n");
}

// The image harness's input: options (channels, height, width), then a PNG or JPEG.
void imageSeeds(const fs::path& out) {
  auto collect = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), size_t(size));
  };
  for (int channels : {1, 3, 4})
    for (int side : {1, 5, 16}) {
      std::vector<uint8_t> px(size_t(side * side * channels));
      for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 37);
      std::string png, jpg;
      stbi_write_png_to_func(collect, &png, side, side, channels, px.data(), side * channels);
      stbi_write_jpg_to_func(collect, &jpg, side, side, channels, px.data(), 90);
      const std::string tag = std::to_string(channels) + "x" + std::to_string(side);
      put(out, "png-" + tag, std::string{char(channels > 1), 12, 7} + png);
      put(out, "jpg-" + tag, std::string{char(2 | (channels > 1)), 3, 20} + jpg);
    }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: make_seeds SOURCE_DIR FASHION_DIR OUT_DIR\n");
    return 2;
  }
  const fs::path source = argv[1], fashion = argv[2], out = argv[3];
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(source / "projects", ec))
    if (e.path().extension() == ".nlproj")
      put(out / "project", e.path().filename().string(), readFile(e.path()));
  idxSeeds(fashion, out / "idx");
  csvSeeds(out / "csv");
  safetensorsSeeds(out / "safetensors");
  eventSeeds(out / "events");
  hostSeeds(out / "hosts");
  imageSeeds(out / "image");
  std::printf("seeds written to %s\n", out.c_str());
  return 0;
}
