// Text for language models (TextSource): a UTF-8 file read as characters or bytes,
// a vocabulary built from the training part, and windows of `context` tokens over
// one token stream shared by every split. The validation part is the file's end, by
// position, so no window of it overlaps the training text.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/data/dataset.h"
#include "engine/data/sources.h"

namespace netloom {

namespace {

// The length of the UTF-8 sequence starting at s[at], or 0 when it is not a valid
// one (overlong forms, surrogates and code points past U+10FFFF included).
size_t utf8Length(const std::string& s, size_t at) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[at + k]); };
  const unsigned char c = b(0);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || at + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(k) & 0xC0) != 0x80) return 0;
  if (n == 2 && c < 0xC2) return 0;                   // overlong
  if (n == 3 && c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
  if (n == 3 && c == 0xED && b(1) >= 0xA0) return 0;  // surrogates
  if (n == 4 && (c > 0xF4 || (c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) >= 0x90))) return 0;
  return n;
}

// The characters of `text`, or the byte offset of the first invalid sequence.
Result<std::vector<std::string>> characters(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    const size_t n = utf8Length(text, at);
    if (n == 0)
      return makeError("is not valid UTF-8 at byte " + std::to_string(at) +
                       " (a byte-level vocabulary reads any file)");
    out.push_back(text.substr(at, n));
    at += n;
  }
  return out;
}

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError("text file '" + path + "' cannot be read");
  std::ostringstream all;
  all << in.rdbuf();
  if (in.bad()) return makeError("text file '" + path + "' could not be read to its end");
  return all.str();
}

// The text of `path`: a file, or a folder's regular files in name order, those that
// hold a NUL byte (an index, not text) and links (a second name) left out.
Result<std::vector<std::pair<std::string, std::string>>> readTexts(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<std::string, std::string>> out;
  if (!fs::is_directory(path, ec)) {
    auto text = readFile(path);
    if (!text) return text.error();
    out.emplace_back(path, std::move(*text));
    return out;
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.is_regular_file(ec) && !e.is_symlink(ec)) names.push_back(e.path().string());
  if (ec) return makeError("text folder '" + path + "' cannot be listed: " + ec.message());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    auto text = readFile(name);
    if (!text) return text.error();
    if (text->find('\0') == std::string::npos) out.emplace_back(name, std::move(*text));
  }
  return out;
}

}  // namespace

Result<TextTokens> readText(const std::string& path, proto::TextSource::Vocabulary vocabulary,
                            std::vector<std::string> vocab, double validationFraction) {
  auto texts = readTexts(path);
  if (!texts) return texts.error();
  std::string text;
  for (const auto& [name, part] : *texts) text += part;
  if (text.empty()) return makeError("text file '" + path + "' is empty");
  TextTokens t;
  if (vocabulary == proto::TextSource::BYTE) {
    t.tokens.assign(text.begin(), text.end());
    for (int32_t& v : t.tokens) v &= 0xFF;
    for (int b = 0; b < 256; ++b) t.vocab.push_back(std::string(1, char(b)));
    t.bytes = true;
    return t;
  }
  std::vector<std::string> chars;
  for (const auto& [name, part] : *texts) {
    auto some = characters(part);
    if (!some) return makeError("text file '" + name + "' " + some.error().message);
    chars.insert(chars.end(), some->begin(), some->end());
  }
  if (vocab.empty()) {
    // Token 0 stands for a character the training part lacks (U+FFFD); the rest
    // are the training part's characters by code point (UTF-8 sorts so).
    const size_t train = size_t(double(chars.size()) * (1 - validationFraction));
    std::vector<std::string> seen(chars.begin(), chars.begin() + long(std::max<size_t>(train, 1)));
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    vocab.push_back("\xEF\xBF\xBD");
    vocab.insert(vocab.end(), seen.begin(), seen.end());
  }
  std::map<std::string, int32_t> id;
  for (size_t i = 0; i < vocab.size(); ++i) id.emplace(vocab[i], int32_t(i));
  t.tokens.reserve(chars.size());
  for (const std::string& ch : chars) {
    auto it = id.find(ch);
    t.tokens.push_back(it == id.end() ? 0 : it->second);
  }
  t.vocab = std::move(vocab);
  return t;
}

Result<std::vector<int32_t>> encodeText(const std::string& text,
                                        const std::vector<std::string>& vocab, bool bytes) {
  std::vector<int32_t> ids;
  if (bytes) {
    for (char c : text) ids.push_back(int32_t(static_cast<unsigned char>(c)));
    return ids;
  }
  auto chars = characters(text);
  if (!chars) return makeError("the prompt " + chars.error().message);
  std::map<std::string, int32_t> id;
  for (size_t i = 0; i < vocab.size(); ++i) id.emplace(vocab[i], int32_t(i));
  for (const std::string& ch : *chars) {
    auto it = id.find(ch);
    ids.push_back(it == id.end() ? 0 : it->second);
  }
  return ids;
}

std::string decodeTokens(const std::vector<int32_t>& ids, const std::vector<std::string>& vocab) {
  std::string out;
  for (int32_t i : ids)
    if (i >= 0 && size_t(i) < vocab.size()) out += vocab[size_t(i)];
  return out;
}

namespace data_internal {

namespace {

// Windows of `context` + 1 tokens (the window and its next token) in [begin, end),
// one every `context` tokens.
std::vector<int64_t> windowStarts(int64_t begin, int64_t end, int64_t context) {
  std::vector<int64_t> out;
  for (int64_t s = begin; s + context + 1 <= end; s += context) out.push_back(s);
  return out;
}

Dataset textSplit(const std::shared_ptr<const std::vector<int32_t>>& tokens, int64_t begin,
                  int64_t end, int64_t context, const TextTokens& t, const std::string& file) {
  Dataset d;
  d.tokens = tokens;
  d.context = context;
  d.sampleShape = {context};
  d.vocab = t.vocab;
  d.byteVocab = t.bytes;
  d.classes = int32_t(t.vocab.size());
  d.textFile = file;
  d.starts = windowStarts(begin, end, context);
  d.textEnd = end;
  return d;
}

}  // namespace

Result<DataSplits> loadText(const proto::DataDef& def, const std::string& baseDir,
                            MemoryBudget& budget) {
  const proto::TextSource& src = def.text();
  const int64_t context = src.context();
  if (context < 1)
    return makeError("data.text.context must be at least 1, got " + std::to_string(context));
  const double fraction = def.validation_fraction();
  if (!(fraction >= 0 && fraction < 1))
    return makeError("validation_fraction must be in [0, 1), got " + std::to_string(fraction));
  const std::string path = resolve(src.path(), baseDir);
  std::error_code ec;
  const int64_t fileBytes = int64_t(std::filesystem::file_size(path, ec));
  // The text, its characters and their ids: about 40 bytes per byte of text at most.
  if (!ec)
    if (Status st = budget.check("data.text.path", fileBytes * 40); !st) return st.error();
  const std::vector<std::string> given(src.vocab().begin(), src.vocab().end());
  auto read = readText(path, src.vocabulary(), given, fraction);
  if (!read) return read.error();
  const int64_t n = int64_t(read->tokens.size());
  const int64_t split = fraction > 0 ? int64_t(double(n) * (1 - fraction)) : n;
  if (split < context + 1)
    return makeError("text file '" + path + "' has " + std::to_string(split) +
                     " tokens for training, fewer than a window of context " +
                     std::to_string(context) + " and the token after it");
  auto tokens = std::make_shared<const std::vector<int32_t>>(std::move(read->tokens));
  DataSplits s;
  s.train = textSplit(tokens, 0, split, context, *read, path);
  s.val = textSplit(tokens, split, n, context, *read, path);
  if (fraction > 0 && s.val.size() == 0)
    return makeError("text file '" + path + "': its validation part (" + std::to_string(n - split) +
                     " tokens) is shorter than a window of context " + std::to_string(context) +
                     " and the token after it");
  if (src.test_path().empty()) {
    s.test = s.val;
  } else {
    const std::string testPath = resolve(src.test_path(), baseDir);
    auto test = readText(testPath, src.vocabulary(), read->vocab, 0);
    if (!test) return test.error();
    const int64_t m = int64_t(test->tokens.size());
    if (m < context + 1)
      return makeError("text file '" + testPath + "' has " + std::to_string(m) +
                       " tokens, fewer than a window of context " + std::to_string(context) +
                       " and the token after it");
    auto testTokens = std::make_shared<const std::vector<int32_t>>(std::move(test->tokens));
    s.test = textSplit(testTokens, 0, m, context, *read, testPath);
  }
  return s;
}

}  // namespace data_internal

}  // namespace netloom
