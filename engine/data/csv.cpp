// Numeric CSV: every column is a float feature except the label column. Labels
// keep their raw value in `targets` (regression) and are rounded to class indices.
// Fields follow RFC 4180: a quoted field may hold the delimiter, "" for a quote and
// line breaks; unquoted fields are trimmed, so CRLF line ends read like LF.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "engine/data/dataset.h"

namespace netloom {
namespace {

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

bool isBlank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), isSpace);
}

bool parseFloat(std::string_view s, float& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// std::getline with a bound: a file without line breaks must not grow one line past
// what memory allows. False at the end of the file, or with `tooLong` set.
bool readLine(std::istream& in, std::string& line, int64_t maxLength, bool& tooLong) {
  line.clear();
  std::streambuf* buf = in.rdbuf();
  while (true) {
    int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof()) return !line.empty();
    if (c == '\n') return true;
    if (int64_t(line.size()) >= maxLength) {
      tooLong = true;
      return false;
    }
    line.push_back(char(c));
  }
}

// Reads records: a physical line, and the lines after it while a quoted field is
// open. Fields are unquoted over the record text in place (a field never grows
// when its quotes go), so the views in fields() point into that text.
class RecordReader {
 public:
  RecordReader(std::istream& in, char delim) : m_in(in), m_delim(delim) {}

  // The next record that is not a blank line. False at the end of the file, or
  // where overlong() or unclosedQuoteLine() says why it stopped early.
  bool next(int64_t maxLength);

  const std::vector<std::string_view>& fields() const { return m_fields; }
  int64_t line() const { return m_recordLine; }  // the physical line the record starts on
  bool overlong() const { return m_overlong; }
  int64_t overlongFrom() const { return m_overlongFrom; }            // the record's first line
  int64_t overlongTo() const { return m_overlongTo; }                // the line that ran over
  int64_t unclosedQuoteLine() const { return m_unclosedQuoteLine; }  // 0: none

 private:
  enum class State { FieldStart, Unquoted, Quoted, QuoteInQuoted };
  bool readPhysical(std::string& out, int64_t maxLength);
  bool continueQuoted(int64_t maxLength);
  void scan(size_t from);
  void step(char c);
  void endField();

  std::istream& m_in;
  char m_delim;
  std::string m_text;                              // the record; fields are written back over it
  std::string m_more;                              // a line that continues a quoted field
  std::vector<std::pair<size_t, size_t>> m_spans;  // each field's [begin, end) in m_text
  std::vector<std::string_view> m_fields;
  State m_state = State::FieldStart;
  size_t m_write = 0;  // where the next kept character goes
  size_t m_begin = 0;  // where the current field starts
  size_t m_keep = 0;   // end of quoted content: trimming stops there
  int64_t m_lineNo = 0, m_recordLine = 0, m_quoteLine = 0, m_unclosedQuoteLine = 0;
  int64_t m_overlongFrom = 0, m_overlongTo = 0;
  bool m_overlong = false;
};

bool RecordReader::readPhysical(std::string& out, int64_t maxLength) {
  if (!readLine(m_in, out, maxLength, m_overlong)) return false;
  // Spreadsheets often start the file with a UTF-8 byte order mark.
  if (++m_lineNo == 1 && out.rfind("\xEF\xBB\xBF", 0) == 0) out.erase(0, 3);
  return true;
}

bool RecordReader::next(int64_t maxLength) {
  do {
    if (!readPhysical(m_text, maxLength)) {
      m_overlongFrom = m_overlongTo = m_lineNo + 1;
      return false;
    }
  } while (isBlank(m_text));  // a blank line cannot open a quote
  m_recordLine = m_lineNo;
  m_spans.clear();
  m_state = State::FieldStart;
  m_write = m_begin = m_keep = 0;
  scan(0);
  while (m_state == State::Quoted) {
    if (!continueQuoted(maxLength)) return false;
  }
  if (m_state == State::QuoteInQuoted) m_keep = m_write;  // the line ended on a closing quote
  endField();
  m_fields.clear();
  for (auto [b, e] : m_spans) m_fields.emplace_back(m_text.data() + b, e - b);
  return true;
}

// A line break inside quotes belongs to the field: the next line joins the record,
// and the record as a whole stays within `maxLength`.
bool RecordReader::continueQuoted(int64_t maxLength) {
  int64_t left = maxLength - int64_t(m_text.size()) - 1;
  if (left < 0) m_overlong = true;
  if (left < 0 || !readPhysical(m_more, left)) {
    if (m_overlong) {
      m_overlongFrom = m_recordLine;
      m_overlongTo = m_lineNo + 1;
    } else {
      m_unclosedQuoteLine = m_quoteLine;
    }
    return false;
  }
  size_t from = m_text.size();
  m_text += '\n';
  m_text += m_more;
  scan(from);
  return true;
}

void RecordReader::scan(size_t from) {
  size_t r = from;
  while (r < m_text.size()) {
    // Inside a field, the run up to the next delimiter (unquoted) or quote (quoted)
    // is kept as it is: one copy, not one step a character.
    if (m_state == State::Unquoted || m_state == State::Quoted) {
      char stop = m_state == State::Unquoted ? m_delim : '"';
      size_t end = std::min(m_text.find(stop, r), m_text.size());
      std::copy(m_text.begin() + r, m_text.begin() + end, m_text.begin() + m_write);
      m_write += end - r;
      r = end;
      if (r == m_text.size()) break;
    }
    step(m_text[r++]);
  }
}

// One character through the field state machine. The delimiter is tested before
// the blanks, so a tab or space delimiter survives the trim.
void RecordReader::step(char c) {
  switch (m_state) {
    case State::FieldStart:
      if (c == m_delim) return endField();
      if (isSpace(c)) return;  // leading blanks are trimmed
      if (c == '"') {
        m_state = State::Quoted;
        m_quoteLine = m_lineNo;
        return;
      }
      m_state = State::Unquoted;
      break;
    case State::Unquoted:
      if (c == m_delim) return endField();
      break;  // a quote inside unquoted text is just a character
    case State::Quoted:
      if (c == '"') {
        m_state = State::QuoteInQuoted;
        return;
      }
      break;
    case State::QuoteInQuoted:
      if (c == '"') {  // "" is one quote
        m_state = State::Quoted;
        break;
      }
      // The quote closed the field. Text after it is kept, as most readers do.
      m_keep = m_write;
      m_state = State::Unquoted;
      if (c == m_delim) return endField();
      break;
  }
  m_text[m_write++] = c;
}

// Ends the field at the write position, trimming trailing blanks but none that
// were inside quotes.
void RecordReader::endField() {
  size_t end = m_write;
  while (end > m_keep && isSpace(m_text[end - 1])) --end;
  m_spans.emplace_back(m_begin, end);
  m_state = State::FieldStart;
  m_begin = m_keep = m_write;
}

// Why the reader stopped before the end of the file, if it did.
Status readFailure(const RecordReader& records, const std::string& path, int64_t remaining) {
  if (records.overlong()) {
    std::string where = records.overlongFrom() == records.overlongTo()
                            ? "line " + std::to_string(records.overlongTo())
                            : "the record on lines " + std::to_string(records.overlongFrom()) +
                                  "-" + std::to_string(records.overlongTo()) +
                                  " (a quoted field spans them)";
    return makeRefusal("'" + path + "' " + where + " is longer than the " + formatBytes(remaining) +
                       " this process has left for it");
  }
  if (records.unclosedQuoteLine() > 0) {
    return makeError("'" + path + "' line " + std::to_string(records.unclosedQuoteLine()) +
                     ": a quoted field starts here and is never closed");
  }
  return {};
}

// Finds the label column: by name in the header, else by 0-based index, and the
// last column where none is asked for.
Status resolveLabel(const std::string& path, const std::string& labelColumn,
                    const std::vector<std::string>& names, int64_t columns, int64_t& labelIndex) {
  if (labelColumn.empty()) {
    labelIndex = columns - 1;
    return {};
  }
  if (!names.empty()) {
    auto it = std::find(names.begin(), names.end(), labelColumn);
    if (it == names.end()) {
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
      return makeError("'" + path + "': no label column '" + labelColumn + "' in the header (" +
                       known + ")");
    }
    labelIndex = it - names.begin();
    return {};
  }
  // Without a header the label column can only be named by its 0-based index.
  int64_t idx = -1;
  auto [ptr, ec] =
      std::from_chars(labelColumn.data(), labelColumn.data() + labelColumn.size(), idx);
  if (ec != std::errc() || ptr != labelColumn.data() + labelColumn.size() || idx < 0 ||
      idx >= columns) {
    return makeError("'" + path + "': label column '" + labelColumn +
                     "' not found (the file has no header and " + std::to_string(columns) +
                     " columns; give a 0-based index)");
  }
  labelIndex = idx;
  return {};
}

// Plans a vector's next growth before it happens: doubling, with the old block
// alive while it is copied.
Status planGrowth(std::vector<float>& v, size_t more, MemoryBudget& budget,
                  const std::string& what) {
  if (v.size() + more <= v.capacity()) return {};
  size_t cap = std::max({v.capacity() * 2, v.size() + more, size_t(1024)});
  int64_t added = int64_t(cap - v.capacity()) * int64_t(sizeof(float));
  if (Status s = budget.check(what, added + int64_t(v.capacity() * sizeof(float))); !s) return s;
  if (Status s = budget.reserve(what, added); !s) return s;
  v.reserve(cap);
  return {};
}

// The column layout every data row must match.
struct Columns {
  std::vector<std::string> names;  // from the header, else empty
  int64_t count = -1;              // fixed by the header or the first data row
  int64_t labelIndex = -1;
};

// Checks one record against the layout and appends its features and label.
Status appendRow(const RecordReader& records, const std::string& path, const Columns& cols,
                 MemoryBudget& budget, Dataset& ds) {
  const auto& fields = records.fields();
  const std::string line = std::to_string(records.line());
  if (static_cast<int64_t>(fields.size()) != cols.count) {
    return makeError("'" + path + "' line " + line + ": expected " + std::to_string(cols.count) +
                     " columns, got " + std::to_string(fields.size()));
  }
  if (cols.count < 2) {
    return makeError("'" + path + "' line " + line +
                     ": need at least one feature column and a label column");
  }
  if (ds.floats.size() + size_t(cols.count) > ds.floats.capacity() ||
      ds.targets.size() == ds.targets.capacity()) {
    std::string rows = "'" + path + "' (rows up to line " + line + ")";
    if (Status s = planGrowth(ds.floats, size_t(cols.count - 1), budget, rows); !s) return s;
    if (Status s = planGrowth(ds.targets, 1, budget, rows); !s) return s;
  }
  for (int64_t c = 0; c < cols.count; ++c) {
    float v = 0;
    if (!parseFloat(fields[c], v) || !std::isfinite(v)) {
      std::string col = std::to_string(c + 1);
      if (!cols.names.empty()) col += " ('" + cols.names[c] + "')";
      return makeError("'" + path + "' line " + line + ", column " + col + ": '" +
                       std::string(fields[c]) + "' is not a number");
    }
    if (c == cols.labelIndex) {
      ds.targets.push_back(v);
      ds.origins.push_back(records.line());
    } else {
      ds.floats.push_back(v);
    }
  }
  return {};
}

// Rounds the targets to class indices once every row is in.
Result<Dataset> finishDataset(Dataset ds, const std::string& path, int64_t columns,
                              MemoryBudget& budget) {
  if (ds.targets.empty()) return makeError("'" + path + "': no data rows");
  // One int32 class index per row.
  if (Status s = budget.reserve("'" + path + "' labels", int64_t(ds.targets.size()) * 4); !s)
    return s.error();

  ds.sampleShape = {columns - 1};
  ds.labelFile = path;
  ds.originsAreLines = true;
  ds.labels.reserve(ds.targets.size());
  int32_t maxLabel = -1;
  for (float t : ds.targets) {
    // Negative values keep their rounded index; classification losses reject them.
    // The clamp only keeps huge regression targets from overflowing the cast.
    auto label = static_cast<int32_t>(std::lround(std::clamp(t, -1e9f, 1e9f)));
    ds.labels.push_back(label);
    maxLabel = std::max(maxLabel, label);
  }
  ds.classes = maxLabel + 1;
  return ds;
}

}  // namespace

Result<Dataset> readCsv(const std::string& path, const std::string& labelColumn, bool hasHeader,
                        char delimiter, const std::shared_ptr<MemoryBudget>& budgetOrNull) {
  std::shared_ptr<MemoryBudget> budget = budgetOrThisProcess(budgetOrNull);
  std::error_code ec;
  auto type = std::filesystem::status(path, ec).type();
  if (type == std::filesystem::file_type::character || type == std::filesystem::file_type::block)
    return makeError("'" + path + "' is a device, not a CSV file");
  std::ifstream in(path, std::ios::binary);  // CR bytes are the parser's to see
  if (!in) return makeError("cannot open CSV file '" + path + "'");

  RecordReader records(in, delimiter);
  Columns cols;
  if (hasHeader) {
    if (records.next(budget->remaining())) {
      for (auto f : records.fields()) cols.names.emplace_back(f);
      cols.count = static_cast<int64_t>(cols.names.size());
    }
    if (Status s = readFailure(records, path, budget->remaining()); !s) return s.error();
    if (cols.count < 0) return makeError("'" + path + "': empty file, expected a header line");
    if (Status s = resolveLabel(path, labelColumn, cols.names, cols.count, cols.labelIndex); !s)
      return s.error();
  }

  Dataset ds;
  while (records.next(budget->remaining())) {
    if (cols.count < 0) {
      cols.count = static_cast<int64_t>(records.fields().size());
      if (Status s = resolveLabel(path, labelColumn, cols.names, cols.count, cols.labelIndex); !s)
        return s.error();
    }
    if (Status s = appendRow(records, path, cols, *budget, ds); !s) return s.error();
  }
  if (Status s = readFailure(records, path, budget->remaining()); !s) return s.error();
  return finishDataset(std::move(ds), path, cols.count, *budget);
}

}  // namespace netloom
