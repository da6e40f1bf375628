// IDX files (the MNIST family), plain or gzip-compressed. zlib's gzread reads
// both transparently, so one path handles either; the magic bytes only decide
// how errors are worded.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "engine/data/dataset.h"
#include "kernels/core/checked.h"

namespace netloom {
namespace {

constexpr uint32_t kIdxImagesMagic = 0x00000803;  // uint8, 3 dims: n, rows, cols
constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // uint8, 1 dim: n
// Far above any real IDX file; bounds the payload the header may claim.
constexpr int64_t kMaxPayload = int64_t(1) << 40;
// Deflate expands at most about 1032:1, so a gzip file of n bytes holds no more
// than this many times n.
constexpr int64_t kMaxGzipRatio = 1100;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// An open IDX file whose header has been read and checked.
class IdxFile {
 public:
  ~IdxFile() {
    if (m_gz) gzclose(m_gz);
  }

  Status open(const std::string& path, uint32_t magic, const char* what) {
    m_path = path;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
      return makeError("IDX " + std::string(what) + " file '" + path + "' does not exist");
    m_gz = gzopen(path.c_str(), "rb");
    if (!m_gz) return makeError("cannot open '" + path + "': " + std::strerror(errno));
    gzbuffer(m_gz, 1 << 20);
    m_gzip = isGzip(path);

    uint8_t head[4];
    int64_t got = read(head, 4);
    if (got < 4) return truncated("header", 4, got);
    uint32_t found = be32(head);
    if (found != magic) {
      return makeError("'" + path + "' is not an IDX " + what + " file: magic " + hex32(found) +
                       ", expected " + hex32(magic) + (m_gzip ? " (after gunzip)" : ""));
    }
    int rank = magic & 0xff;
    uint8_t dims[12];
    got = read(dims, 4 * rank);
    if (got < 4 * rank) return truncated("header", 4 * rank, got);
    for (int i = 0; i < rank; ++i) m_dims.push_back(be32(dims + 4 * i));
    // Checked per dimension from the last, so that rows × columns is bounded even for
    // a file that claims no images.
    std::optional<int64_t> total = 1;
    for (int i = rank - 1; i >= 0 && total; --i) {
      total = checkedMul(*total, m_dims[i]);
      if (total && *total > kMaxPayload) total.reset();
    }
    if (!total) return makeError("'" + m_path + "': implausible IDX dimensions " + dimsText());
    m_payload = *total;
    // The file must be able to hold what its header claims.
    auto size = std::filesystem::file_size(path, ec);
    if (!ec) {
      int64_t header = 4 + 4 * int64_t(rank);
      int64_t room = m_gzip ? saturatingMul(int64_t(size), kMaxGzipRatio) : int64_t(size) - header;
      std::string claim = "the header claims " + dimsText() + " (" + formatBytes(m_payload) + ")";
      if (m_payload > room && m_gzip)
        return makeError("'" + m_path + "': " + claim + ", more than the gzip file (" +
                         formatBytes(int64_t(size)) + ") can hold");
      if (m_payload > room)
        return makeError("'" + m_path + "': truncated data, expected " + std::to_string(m_payload) +
                         " bytes, got " + std::to_string(std::max<int64_t>(room, 0)) + " (" +
                         claim + ")");
    }
    return {};
  }

  int64_t payload() const { return m_payload; }

  std::string dimsText() const {
    std::string out;
    for (size_t i = 0; i < m_dims.size(); ++i) out += (i ? "×" : "") + std::to_string(m_dims[i]);
    return out;
  }

  // Reads the whole payload into `out`, which is resized to fit.
  Status readPayload(std::vector<uint8_t>& out) {
    out.resize(static_cast<size_t>(m_payload));
    int64_t got = read(out.data(), m_payload);
    if (got < m_payload) return truncated("data", m_payload, got);
    return {};
  }

  const std::vector<int64_t>& dims() const { return m_dims; }

 private:
  static uint32_t be32(const uint8_t* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
  }

  static bool isGzip(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    unsigned char m[2] = {0, 0};
    size_t n = std::fread(m, 1, 2, f);
    std::fclose(f);
    return n == 2 && m[0] == 0x1f && m[1] == 0x8b;
  }

  // Reads up to `n` bytes; returns how many arrived (short on EOF or a damaged stream).
  int64_t read(uint8_t* dst, int64_t n) {
    int64_t done = 0;
    while (done < n) {
      unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, 1 << 30));
      int r = gzread(m_gz, dst + done, chunk);
      if (r <= 0) break;
      done += r;
    }
    return done;
  }

  Error truncated(const char* part, int64_t expected, int64_t got) {
    std::string msg = "'" + m_path + "': truncated " + part + ", expected " +
                      std::to_string(expected) + " bytes, got " + std::to_string(got);
    int err = Z_OK;
    const char* z = gzerror(m_gz, &err);
    std::string zmsg = z ? z : "";
    // zlib prefixes its message with the path, which the message already names.
    if (zmsg.rfind(m_path + ": ", 0) == 0) zmsg.erase(0, m_path.size() + 2);
    if (err != Z_OK && !zmsg.empty()) msg += " (gzip: " + zmsg + ")";
    return makeError(msg);
  }

  std::string m_path;
  gzFile m_gz = nullptr;
  bool m_gzip = false;
  std::vector<int64_t> m_dims;
  int64_t m_payload = 0;
};

}  // namespace

Result<Dataset> readIdx(const std::string& imagesPath, const std::string& labelsPath,
                        const std::shared_ptr<MemoryBudget>& budgetOrNull) {
  std::shared_ptr<MemoryBudget> budget = budgetOrThisProcess(budgetOrNull);
  Dataset ds;
  int64_t imageCount = 0;
  {
    IdxFile images;
    if (Status s = images.open(imagesPath, kIdxImagesMagic, "images"); !s) return s.error();
    const auto& d = images.dims();
    imageCount = d[0];
    ds.sampleShape = {1, d[1], d[2]};
    if (Status s = budget->reserve("IDX images '" + imagesPath + "' (" + images.dimsText() + ")",
                                   images.payload());
        !s)
      return s.error();
    if (Status s = images.readPayload(ds.bytes); !s) return s.error();
  }

  std::vector<uint8_t> raw;
  {
    IdxFile labels;
    if (Status s = labels.open(labelsPath, kIdxLabelsMagic, "labels"); !s) return s.error();
    // The bytes, then one int32 class index each.
    if (Status s = budget->reserve("IDX labels '" + labelsPath + "' (" + labels.dimsText() + ")",
                                   saturatingMul(labels.payload(), 5));
        !s)
      return s.error();
    if (Status s = labels.readPayload(raw); !s) return s.error();
  }
  auto labelCount = static_cast<int64_t>(raw.size());
  if (labelCount != imageCount) {
    return makeError("IDX count mismatch: '" + imagesPath + "' has " + std::to_string(imageCount) +
                     " images but '" + labelsPath + "' has " + std::to_string(labelCount) +
                     " labels");
  }
  ds.labels.assign(raw.begin(), raw.end());
  ds.labelFile = labelsPath;
  ds.origins.resize(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) ds.origins[i] = int64_t(i) + 1;
  int32_t maxLabel = -1;
  for (uint8_t v : raw) maxLabel = std::max<int32_t>(maxLabel, v);
  ds.classes = maxLabel + 1;
  return ds;
}

}  // namespace netloom
