// safetensors reading and writing. The reader trusts nothing in the file: every length
// and offset is checked against the real file size before anything is allocated or read.
#include "engine/io/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "engine/io/json.h"
#include "engine/io/output_file.h"
#include "engine/util/memory_budget.h"

namespace netloom {

static_assert(std::endian::native == std::endian::little,
              "tensor bytes are copied as-is, so the host must be little-endian like the format");

namespace {

// The same bound the reference implementation uses: a real header is kilobytes, and a
// larger claim is a corrupt or hostile file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr const char* kMetadataKey = "__metadata__";

std::string quote(const std::string& s) {
  return "\"" + s + "\"";
}

std::string errnoText(int err) {
  return std::strerror(err != 0 ? err : EIO);
}

bool dtypeFromName(const std::string& name, DType& out) {
  for (DType t : {DType::F32, DType::I32, DType::I64, DType::U8}) {
    if (name == dtypeName(t)) {
      out = t;
      return true;
    }
  }
  return false;
}

bool asIndex(const Json& j, uint64_t& out) {
  return j.isNumber() && j.asUnsigned(out);
}

// numel * element size, or false on a negative dimension or overflow.
bool byteSize(const Shape& shape, DType dtype, uint64_t& out) {
  uint64_t n = dtypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  out = n;
  return true;
}

struct Entry {
  NamedTensor tensor;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Parses one header member into `e`; returns a message without the file/tensor prefix.
std::string parseEntry(const Json& j, uint64_t dataBytes, Entry& e) {
  if (!j.isObject()) return "entry is not an object";
  const Json* dtype = j.find("dtype");
  const Json* shape = j.find("shape");
  const Json* offsets = j.find("data_offsets");
  if (!dtype || !shape || !offsets) return "entry needs dtype, shape and data_offsets";
  if (!dtype->isString()) return "dtype is not a string";
  if (!dtypeFromName(dtype->asString(), e.tensor.dtype)) {
    return "unsupported dtype " + quote(dtype->asString()) + " (F32, I32, I64 and U8 are)";
  }
  if (!shape->isArray()) return "shape is not an array";
  for (const Json& d : shape->items()) {
    uint64_t v;
    if (!asIndex(d, v)) return "shape " + shape->dump() + " has a dimension that is not a size";
    e.tensor.shape.push_back(static_cast<int64_t>(v));
  }
  if (!offsets->isArray() || offsets->items().size() != 2 ||
      !asIndex(offsets->items()[0], e.begin) || !asIndex(offsets->items()[1], e.end) ||
      e.begin > e.end) {
    return "data_offsets " + offsets->dump() + " is not a [begin, end] pair";
  }
  uint64_t expected;
  if (!byteSize(e.tensor.shape, e.tensor.dtype, expected)) {
    return "shape " + shape->dump() + " is too large";
  }
  if (e.end - e.begin != expected) {
    return "data_offsets " + offsets->dump() + " span " + std::to_string(e.end - e.begin) +
           " bytes but " + dtype->asString() + " " + shape->dump() + " needs " +
           std::to_string(expected);
  }
  if (e.end > dataBytes) {
    return "data_offsets " + offsets->dump() + " run past the data section (" +
           std::to_string(dataBytes) + " bytes)";
  }
  return {};
}

// Tensors must tile the data section exactly, as the reference implementation demands:
// no overlap (two tensors sharing bytes), no gaps, nothing trailing.
std::string checkLayout(const std::vector<Entry>& entries, uint64_t dataBytes) {
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t cursor = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : sorted) {
    if (e->begin < cursor) {
      return "tensor " + quote(e->tensor.name) + " overlaps tensor " + quote(previous->tensor.name);
    }
    if (e->begin > cursor) {
      return "tensor " + quote(e->tensor.name) + ": gap of " + std::to_string(e->begin - cursor) +
             " bytes before its data";
    }
    cursor = e->end;
    previous = e;
  }
  if (cursor != dataBytes) {
    return "data section is " + std::to_string(dataBytes) + " bytes but the tensors cover " +
           std::to_string(cursor);
  }
  return {};
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

Status writeSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  auto fail = [&](const std::string& tensor, const std::string& what) {
    return Status(makeError(path + ": tensor " + quote(tensor) + ": " + what));
  };
  // The header is assembled as text: Json::set would make it quadratic in tensor count.
  std::string header = "{";
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta.set(k, Json::string(v));
    header += Json::string(kMetadataKey).dump() + ":" + meta.dump();
  }
  std::vector<std::string> names;
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    if (t.name.empty() || t.name == kMetadataKey) return fail(t.name, "reserved or empty name");
    uint64_t bytes;
    if (!byteSize(t.shape, t.dtype, bytes)) return fail(t.name, "invalid shape");
    if (bytes != t.data.size()) {
      return fail(t.name, "has " + std::to_string(t.data.size()) + " bytes but " +
                              dtypeName(t.dtype) + " " + shapeToString(t.shape) + " needs " +
                              std::to_string(bytes));
    }
    names.push_back(t.name);
    Json entry = Json::object();
    entry.set("dtype", Json::string(dtypeName(t.dtype)));
    Json shape = Json::array();
    for (int64_t d : t.shape) shape.push(Json::number(static_cast<double>(d)));
    entry.set("shape", std::move(shape));
    Json offsets = Json::array();
    offsets.push(Json::number(static_cast<double>(offset)));
    offsets.push(Json::number(static_cast<double>(offset + bytes)));
    entry.set("data_offsets", std::move(offsets));
    if (header.size() > 1) header += ',';
    header += Json::string(t.name).dump() + ":" + entry.dump();
    offset += bytes;
  }
  header += '}';
  std::sort(names.begin(), names.end());
  auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup != names.end()) return fail(*dup, "name used twice");
  // Padding keeps the data section 8-byte aligned for readers that map the file.
  header.append((8 - header.size() % 8) % 8, ' ');

  std::string bytes;
  bytes.reserve(8 + header.size() + offset);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((n >> (8 * i)) & 0xFF);
  bytes += header;
  for (const NamedTensor& t : tensors) {
    bytes.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  }
  return writeFileAtomic(path, bytes);
}

Result<std::vector<NamedTensor>> readSafetensors(const std::string& path,
                                                 std::map<std::string, std::string>* metadata) {
  auto fail = [&](const std::string& what) { return makeError(path + ": " + what); };
  FilePtr file(std::fopen(path.c_str(), "rb"));
  if (!file) return fail("cannot open: " + errnoText(errno));
  struct stat st;
  if (::fstat(::fileno(file.get()), &st) != 0) return fail("cannot stat: " + errnoText(errno));
  const uint64_t fileBytes = static_cast<uint64_t>(st.st_size);
  if (fileBytes < 8) {
    return fail("file is " + std::to_string(fileBytes) +
                " bytes, too short for the 8-byte header length");
  }
  unsigned char lenBytes[8];
  if (std::fread(lenBytes, 1, 8, file.get()) != 8) return fail("read failed");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i) headerBytes = (headerBytes << 8) | lenBytes[i];
  if (headerBytes > fileBytes - 8) {
    return fail("header length " + std::to_string(headerBytes) + " is larger than the file (" +
                std::to_string(fileBytes) + " bytes); truncated or not safetensors");
  }
  if (headerBytes > kMaxHeaderBytes) {
    return fail("header length " + std::to_string(headerBytes) + " exceeds the 100 MiB limit");
  }
  std::string headerText(headerBytes, '\0');
  if (std::fread(headerText.data(), 1, headerBytes, file.get()) != headerBytes) {
    return fail("read failed in the header");
  }
  Result<Json> header = Json::parse(headerText);
  if (!header) return fail("header is not valid JSON: " + header.error().message);
  if (!header->isObject()) return fail("header is not a JSON object");

  const uint64_t dataStart = 8 + headerBytes;
  const uint64_t dataBytes = fileBytes - dataStart;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header->members()) {
    if (name == kMetadataKey) {
      if (!value.isObject()) return fail("__metadata__ is not an object");
      for (const auto& [k, v] : value.members()) {
        if (!v.isString()) return fail("__metadata__ value for " + quote(k) + " is not a string");
        if (metadata) (*metadata)[k] = v.asString();
      }
      continue;
    }
    Entry e;
    e.tensor.name = name;
    std::string problem = parseEntry(value, dataBytes, e);
    if (!problem.empty()) return fail("tensor " + quote(name) + ": " + problem);
    entries.push_back(std::move(e));
  }
  std::string problem = checkLayout(entries, dataBytes);
  if (!problem.empty()) return fail(problem);
  // The tensors are read into memory: a file larger than what this process can have
  // is refused before the first allocation.
  if (Status s = MemoryBudget::forThisProcess()->check(
          path + ": its tensors", int64_t(std::min<uint64_t>(dataBytes, INT64_MAX)));
      !s)
    return s.error();

  std::vector<NamedTensor> out;
  out.reserve(entries.size());
  for (Entry& e : entries) {
    NamedTensor& t = e.tensor;
    t.data.resize(e.end - e.begin);
    if (!t.data.empty() &&
        (::fseeko(file.get(), static_cast<off_t>(dataStart + e.begin), SEEK_SET) != 0 ||
         std::fread(t.data.data(), 1, t.data.size(), file.get()) != t.data.size())) {
      return fail("tensor " + quote(t.name) + ": read failed (file changed while reading?)");
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace netloom
