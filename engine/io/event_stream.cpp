// Writing and tailing the length-delimited TrainEvent stream. A reader may run while the
// writer appends, so a short read at the end of the file is normal, not corruption.
#include "engine/io/event_stream.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "engine/io/output_file.h"

namespace netloom {

namespace {

// No real event comes near this; a larger length prefix means the bytes are not a
// record boundary, and waiting for that many bytes would stall a tailer forever.
constexpr uint64_t kMaxRecordBytes = 64ull << 20;
constexpr int kMaxVarintBytes = 10;

std::string errnoText(int err) {
  return std::strerror(err != 0 ? err : EIO);
}

void appendVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

enum class Varint { Ok, Incomplete, Malformed };

Varint readVarint(const unsigned char* p, size_t n, uint64_t& value, size_t& used) {
  value = 0;
  for (size_t i = 0; i < static_cast<size_t>(kMaxVarintBytes); ++i) {
    if (i == n) return Varint::Incomplete;
    value |= static_cast<uint64_t>(p[i] & 0x7F) << (7 * i);
    if ((p[i] & 0x80) == 0) {
      // The tenth byte may carry only the top bit of a 64-bit value.
      if (i == 9 && p[i] > 1) return Varint::Malformed;
      used = i + 1;
      return Varint::Ok;
    }
  }
  return Varint::Malformed;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

EventWriter::~EventWriter() {
  close();
}

Status EventWriter::open(const std::string& path, bool append) {
  close();
  // The stream grows in place for its readers, so it is never renamed into place; but
  // the same rules hold for what the path names (engine/io/output_file.h).
  auto target = resolveOutput(path);
  if (!target) return target.error();
  const std::string& file = target->path;
  // A device or FIFO has no earlier records to keep: it is written as it is.
  if (append && target->exists && !target->inPlace) {
    auto existing = readEvents(file);
    if (!existing) return existing.error();
    std::error_code ec;
    std::filesystem::resize_file(file, uint64_t(existing->nextOffset), ec);
    if (ec) return makeError("cannot trim the torn end of " + path + ": " + ec.message());
  }
  m_file = std::fopen(file.c_str(), append || target->inPlace ? "ab" : "wb");
  if (!m_file) return makeError("cannot write events to " + path + ": " + errnoText(errno));
  m_path = path;
  return {};
}

std::string encodeEvent(const proto::TrainEvent& event) {
  std::string body = event.SerializeAsString();
  std::string record;
  appendVarint(record, body.size());
  return record + body;
}

Status EventWriter::write(const proto::TrainEvent& event) {
  if (!m_file) return makeError("event stream is not open");
  const std::string record = encodeEvent(event);
  // One fwrite and a flush per event: a tailer sees whole records as soon as possible
  // and at worst one torn record at the end, which readEvents leaves for later.
  if (std::fwrite(record.data(), 1, record.size(), m_file) != record.size() ||
      std::fflush(m_file) != 0) {
    return makeError(m_path + ": cannot write event: " + errnoText(errno));
  }
  return {};
}

void EventWriter::close() {
  if (m_file) std::fclose(m_file);
  m_file = nullptr;
}

Result<EventReadResult> readEvents(const std::string& path, int64_t offset) {
  auto fail = [&](const std::string& what) { return makeError(path + ": " + what); };
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) return fail("cannot open: " + errnoText(errno));
  struct stat st;
  if (::fstat(::fileno(file.get()), &st) != 0) return fail("cannot stat: " + errnoText(errno));
  if (offset < 0 || offset > st.st_size) {
    return fail("offset " + std::to_string(offset) + " is outside the file (" +
                std::to_string(st.st_size) + " bytes)");
  }
  if (::fseeko(file.get(), offset, SEEK_SET) != 0) return fail("seek failed");
  // Read what is there now; bytes appended after this are for the next call.
  std::string buf(static_cast<size_t>(st.st_size - offset), '\0');
  buf.resize(std::fread(buf.data(), 1, buf.size(), file.get()));
  auto r = parseEvents(buf, offset);
  if (!r) return fail(r.error().message);
  return r;
}

Result<EventReadResult> parseEvents(const std::string& buf, int64_t offset) {
  auto fail = [](const std::string& what) { return makeError(what); };
  EventReadResult result;
  const auto* p = reinterpret_cast<const unsigned char*>(buf.data());
  size_t pos = 0;
  while (pos < buf.size()) {
    const std::string at = "byte " + std::to_string(offset + static_cast<int64_t>(pos));
    uint64_t len = 0;
    size_t used = 0;
    Varint v = readVarint(p + pos, buf.size() - pos, len, used);
    if (v == Varint::Incomplete) break;
    if (v == Varint::Malformed) return fail("corrupt event length at " + at);
    if (len > kMaxRecordBytes) {
      return fail("corrupt event at " + at + ": length " + std::to_string(len) +
                  " exceeds the limit");
    }
    if (len > buf.size() - pos - used) break;  // torn: the writer is mid-record
    proto::TrainEvent event;
    if (!event.ParseFromArray(p + pos + used, static_cast<int>(len))) {
      return fail("corrupt event at " + at + ": not a TrainEvent");
    }
    result.events.push_back(std::move(event));
    pos += used + len;
  }
  result.nextOffset = offset + static_cast<int64_t>(pos);
  return result;
}

}  // namespace netloom
