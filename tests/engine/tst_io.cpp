// The IO layer: JSON, safetensors files (ours and ones laid out by hand as the Python
// library writes them), project text and atomic writes (the event stream's tests are
// in tst_event_stream.cpp).
#include <google/protobuf/util/message_differencer.h>

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "engine/io/json.h"
#include "engine/io/output_file.h"
#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"
#include "output_fixture.h"

using namespace netloom;
using outputfixture::fileSize;
using outputfixture::readAll;
using outputfixture::writeRaw;

namespace {

// The byte layout the reference Python library produces: u64 little-endian header
// length, space-padded JSON header, then the data.
std::string safetensorsBytes(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += char((n >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string floatBytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
  return out;
}

template <class T>
NamedTensor makeTensor(const std::string& name, DType dtype, Shape shape) {
  NamedTensor t{name, dtype, shape, {}};
  int64_t n = numel(shape);
  t.data.resize(size_t(n) * sizeof(T));
  T* p = reinterpret_cast<T*>(t.data.data());
  for (int64_t i = 0; i < n; ++i) p[i] = T(i * 3 - 7);
  return t;
}

}  // namespace

class TestIo : public QObject {
  Q_OBJECT

 private slots:
  void jsonRoundTrip();
  void jsonNumbers();
  void jsonEscapes();
  void jsonErrors_data();
  void jsonErrors();
  void jsonDepthLimit();
  void safetensorsRoundTrip();
  void safetensorsPythonLayout();
  void safetensorsErrors_data();
  void safetensorsErrors();
  void safetensorsRejectsBadInput();
  void projectText();
  void atomicWrite();
  void atomicWriteFailureLeavesNothing();
};

void TestIo::jsonRoundTrip() {
  Json root = Json::object();
  root.set("name", Json::string("mlp"));
  root.set("ok", Json::boolean(true));
  root.set("none", Json());
  Json arr = Json::array();
  arr.push(Json::number(1));
  arr.push(Json::number(-2.5));
  arr.push(Json::object());
  arr.push(Json::array());
  root.set("list", std::move(arr));
  root.set("ok", Json::boolean(false));  // replaces, keeps its place

  const std::string text = root.dump();
  QCOMPARE(text, std::string(R"({"name":"mlp","ok":false,"none":null,"list":[1,-2.5,{},[]]})"));

  Result<Json> back = Json::parse(" \n" + text + "\t ");
  QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
  QCOMPARE(back->dump(), text);
  QVERIFY(back->isObject());
  QCOMPARE(back->members().size(), size_t(4));
  QCOMPARE(back->members()[3].first, std::string("list"));
  QVERIFY(back->find("ok") && !back->find("ok")->asBool());
  QVERIFY(back->find("none") && back->find("none")->type() == Json::Type::Null);
  QCOMPARE(back->find("list")->items()[1].asNumber(), -2.5);
  QVERIFY(back->find("missing") == nullptr);
}

void TestIo::jsonNumbers() {
  QCOMPARE(Json::number(3).dump(), std::string("3"));
  QCOMPARE(Json::number(-0.0).dump(), std::string("-0"));
  QCOMPARE(Json::number(1e15).dump(), std::string("1000000000000000"));
  QCOMPARE(Json::number(9007199254740991.0).dump(), std::string("9007199254740991"));
  QCOMPARE(Json::number(0.1).dump(), std::string("0.1"));
  QCOMPARE(Json::number(std::nan("")).dump(), std::string("null"));
  // Every value must survive dump -> parse bit for bit.
  for (double v : {0.1, 1.0 / 3.0, -2.5e-8, 1e300, 4.9e-324, 9007199254740993.0, 123456.789,
                   std::numeric_limits<double>::max(), -1e22}) {
    Result<Json> back = Json::parse(Json::number(v).dump());
    QVERIFY(back.ok());
    QCOMPARE(back->asNumber(), v);
  }
  Result<Json> parsed = Json::parse("[0, -0.5, 1E3, 2e-2, 1.25e+2, 12345678901234]");
  QVERIFY(parsed.ok());
  QCOMPARE(parsed->dump(), std::string("[0,-0.5,1000,0.02,125,12345678901234]"));
  // Whole numbers are held exactly up to 2^64 - 1 (safetensors offsets are u64).
  Result<Json> big = Json::parse("[18446744073709551615, 9007199254740993, 1e3, 1.5, -1]");
  QVERIFY(big.ok());
  uint64_t v = 0;
  QVERIFY(big->items()[0].asUnsigned(v) && v == 18446744073709551615ull);
  QVERIFY(big->items()[1].asUnsigned(v) && v == 9007199254740993ull);
  QVERIFY(big->items()[2].asUnsigned(v) && v == 1000);
  QVERIFY(!big->items()[3].asUnsigned(v) && !big->items()[4].asUnsigned(v));
  QCOMPARE(big->dump(), std::string("[18446744073709551615,9007199254740993,1000,1.5,-1]"));
  Result<Json> past = Json::parse("18446744073709551616");  // one more: a double now
  QVERIFY(past.ok() && !past->asUnsigned(v));
}

void TestIo::jsonEscapes() {
  Result<Json> s = Json::parse(R"("a\n\t\"\\\/\b\f\r\u00e9\u20ac\ud83d\ude00z")");
  QVERIFY(s.ok());
  QCOMPARE(s->asString(), std::string("a\n\t\"\\/\b\f\r\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z"));

  // Raw UTF-8 passes through; control characters and quotes come back escaped.
  const std::string raw = std::string("x\"y\\\x01\n\xC3\xA9", 8);
  const std::string dumped = Json::string(raw).dump();
  QCOMPARE(dumped, std::string("\"x\\\"y\\\\\\u0001\\n\xC3\xA9\""));
  Result<Json> back = Json::parse(dumped);
  QVERIFY(back.ok());
  QCOMPARE(back->asString(), raw);

  Json obj = Json::object();
  obj.set("k\"ey", Json::string("v"));
  QCOMPARE(obj.dump(), std::string(R"({"k\"ey":"v"})"));
}

void TestIo::jsonErrors_data() {
  QTest::addColumn<QByteArray>("text");
  QTest::addColumn<int>("offset");
  QTest::addColumn<QString>("what");
  // The wording is nlohmann/json's; the byte is the one the parser stopped at.
  QTest::newRow("empty") << QByteArray("") << 0 << "end of input";
  QTest::newRow("trailing comma") << QByteArray(R"({"a":1,})") << 7 << "expected string literal";
  QTest::newRow("missing comma") << QByteArray("[1 2]") << 3 << "expected ']'";
  QTest::newRow("leading zero") << QByteArray("01") << 1 << "expected end of input";
  QTest::newRow("bare dot") << QByteArray("[1.]") << 3 << "digit";
  QTest::newRow("unterminated") << QByteArray("\"abc") << 4 << "missing closing quote";
  QTest::newRow("bad literal") << QByteArray("[tru]") << 4 << "invalid literal";
  QTest::newRow("nan") << QByteArray("NaN") << 0 << "invalid literal";
  QTest::newRow("after value") << QByteArray("[1] x") << 4 << "expected end of input";
  QTest::newRow("duplicate key") << QByteArray(R"({"a":1, "a":2})") << 8 << "duplicate key \"a\"";
  QTest::newRow("duplicate escaped key")
      << QByteArray(R"({"a\"":1, "a\u0022":2})") << 10 << "duplicate key \"a\"\"";
  QTest::newRow("duplicate nested key")
      << QByteArray(R"({"a":{"b":1},"b":{"b":2,"b":3}})") << 24 << "duplicate key \"b\"";
  QTest::newRow("bad escape") << QByteArray(R"(["\q"])") << 3 << "after backslash";
  QTest::newRow("lone surrogate") << QByteArray(R"("\ud800x")") << 7 << "surrogate";
  QTest::newRow("bad hex") << QByteArray(R"("\u12g4")") << 5 << "hex";
  QTest::newRow("control char") << QByteArray("\"a\x01\"") << 2 << "control";
  QTest::newRow("bad utf8") << QByteArray("\"a\xFF\"") << 2 << "UTF-8";
  QTest::newRow("overlong utf8") << QByteArray("\"\xC0\xAF\"") << 1 << "UTF-8";
  QTest::newRow("utf8 surrogate") << QByteArray("\"\xED\xA0\x80\"") << 2 << "UTF-8";
  QTest::newRow("overflow") << QByteArray("1e400") << 4 << "overflow";
  QTest::newRow("single quotes") << QByteArray("{'a':1}") << 1 << "expected string literal";
  QTest::newRow("comment") << QByteArray("[1 /* x */]") << 3 << "invalid literal";
  QTest::newRow("byte order mark") << QByteArray("\xEF\xBB\xBF{}") << 0 << "byte order mark";
}

void TestIo::jsonErrors() {
  QFETCH(QByteArray, text);
  QFETCH(int, offset);
  QFETCH(QString, what);
  Result<Json> r = Json::parse(text.toStdString());
  QVERIFY(!r.ok());
  const QString msg = QString::fromStdString(r.error().message);
  QVERIFY2(msg.contains(QString("at byte %1").arg(offset)), qPrintable(msg));
  QVERIFY2(msg.contains(what), qPrintable(msg));
  // Shown in the IDE and carried in events: the message itself is valid UTF-8.
  QCOMPARE(msg.toUtf8().toStdString(), r.error().message);
}

void TestIo::jsonDepthLimit() {
  QVERIFY(Json::parse(std::string(200, '[') + std::string(200, ']')).ok());
  Result<Json> deep = Json::parse(std::string(100000, '['));
  QVERIFY(!deep.ok());
  QVERIFY(QString::fromStdString(deep.error().message).contains("nesting"));
  Result<Json> deepObj = Json::parse([] {
    std::string s;
    for (int i = 0; i < 1000; ++i) s += "{\"a\":";
    return s;
  }());
  QVERIFY(!deepObj.ok());
  QVERIFY(QString::fromStdString(deepObj.error().message).contains("nesting"));
  // The bound itself: 256 levels are read, the 257th opening bracket is the fault.
  QVERIFY(Json::parse(std::string(256, '[') + std::string(256, ']')).ok());
  Result<Json> over = Json::parse(std::string(257, '[') + std::string(257, ']'));
  QVERIFY(!over.ok());
  QVERIFY2(QString::fromStdString(over.error().message).contains("at byte 256"),
           over.error().message.c_str());
}

void TestIo::safetensorsRoundTrip() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const std::string path = dir.filePath("w.safetensors").toStdString();
  std::vector<NamedTensor> tensors = {
      makeTensor<float>("layer1.weight", DType::F32, {3, 4}),
      makeTensor<float>("layer1.bias", DType::F32, {4}),
      makeTensor<int32_t>("counts", DType::I32, {2, 1, 3}),
      makeTensor<int64_t>("step", DType::I64, {}),  // a scalar: shape [], one element
      makeTensor<uint8_t>("mask", DType::U8, {5}),
      makeTensor<float>("empty", DType::F32, {0, 7}),
  };
  const std::map<std::string, std::string> meta = {{"format", "pt"},
                                                   {"note", "quotes \" and \xC3\xA9"}};
  Status st = writeSafetensors(path, tensors, meta);
  QVERIFY2(st.ok(), st.ok() ? "" : st.message().c_str());

  const std::string raw = readAll(path);
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i) headerLen = (headerLen << 8) | uint8_t(raw[size_t(i)]);
  QCOMPARE(headerLen % 8, uint64_t(0));
  size_t dataBytes = 0;
  for (const auto& t : tensors) dataBytes += t.data.size();
  QCOMPARE(raw.size(), size_t(8 + headerLen + dataBytes));
  QVERIFY(Json::parse(raw.substr(8, headerLen)).ok());

  std::map<std::string, std::string> metaBack;
  Result<std::vector<NamedTensor>> back = readSafetensors(path, &metaBack);
  QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
  QCOMPARE(metaBack, meta);
  QCOMPARE(back->size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& a = tensors[i];
    const NamedTensor& b = (*back)[i];
    QCOMPARE(b.name, a.name);
    QCOMPARE(b.dtype, a.dtype);
    QCOMPARE(b.shape, a.shape);
    QCOMPARE(b.data, a.data);
  }
  QVERIFY(readSafetensors(path).ok());  // metadata is optional for the caller

  // No metadata: no __metadata__ key at all.
  QVERIFY(writeSafetensors(path, {tensors[1]}).ok());
  QVERIFY(!QString::fromStdString(readAll(path)).contains("__metadata__"));
  std::map<std::string, std::string> none;
  QCOMPARE(readSafetensors(path, &none)->size(), size_t(1));
  QVERIFY(none.empty());
}

void TestIo::safetensorsPythonLayout() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("py.safetensors").toStdString();
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string bytes = safetensorsBytes(header, floatBytes({1.5f, -2.0f}));
  QCOMPARE((bytes.size() - 8) % 8, size_t(0));
  writeRaw(path, bytes);
  Result<std::vector<NamedTensor>> r = readSafetensors(path);
  QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
  QCOMPARE(r->size(), size_t(1));
  const NamedTensor& t = (*r)[0];
  QCOMPARE(t.name, std::string("a"));
  QCOMPARE(t.dtype, DType::F32);
  QCOMPARE(t.shape, Shape{2});
  float v[2];
  std::memcpy(v, t.data.data(), sizeof v);
  QCOMPARE(v[0], 1.5f);
  QCOMPARE(v[1], -2.0f);

  // Python sorts by dtype and name, so data order need not follow header order; and
  // __metadata__ may come anywhere.
  const std::string two =
      safetensorsBytes(R"({"z":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
                       R"("__metadata__":{"format":"pt"},)"
                       R"("b":{"dtype":"U8","shape":[2,2],"data_offsets":[8,12]}})",
                       std::string("\x05\0\0\0\0\0\0\0\x01\x02\x03\x04", 12));
  writeRaw(path, two);
  std::map<std::string, std::string> meta;
  Result<std::vector<NamedTensor>> r2 = readSafetensors(path, &meta);
  QVERIFY2(r2.ok(), r2.ok() ? "" : r2.error().message.c_str());
  QCOMPARE(meta.at("format"), std::string("pt"));
  QCOMPARE((*r2)[0].name, std::string("z"));
  QCOMPARE((*r2)[0].dtype, DType::I64);
  QCOMPARE((*r2)[1].data, (std::vector<uint8_t>{1, 2, 3, 4}));
}

void TestIo::safetensorsErrors_data() {
  QTest::addColumn<QByteArray>("bytes");
  QTest::addColumn<QString>("what");  // besides the file name

  const std::string good = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data = floatBytes({1, 2});
  const std::string full = safetensorsBytes(good, data);
  auto row = [](const char* name, const std::string& b, const char* what) {
    QTest::newRow(name) << QByteArray(b.data(), qsizetype(b.size())) << QString(what);
  };
  row("too short", std::string("\x08\0\0", 3), "too short");
  row("truncated data", full.substr(0, full.size() - 3), "tensor \"a\"");
  row("truncated header", full.substr(0, 20), "header length");
  std::string hugeLen = full;
  hugeLen[5] = '\x7f';
  row("bad header length", hugeLen, "header length");
  row("bad json", safetensorsBytes(R"({"a":{"dtype":"F32",)", ""), "not valid JSON");
  row("not an object", safetensorsBytes("[1,2]", ""), "not a JSON object");
  row("unknown dtype",
      safetensorsBytes(R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})",
                       std::string(4, '\0')),
      "tensor \"a\": unsupported dtype \"BF16\"");
  row("size mismatch",
      safetensorsBytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data),
      "tensor \"a\": data_offsets [0,8] span 8 bytes but F32 [3] needs 12");
  row("offsets past end",
      safetensorsBytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data),
      "tensor \"a\": data_offsets [4,12] run past");
  row("reversed offsets",
      safetensorsBytes(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", data),
      "tensor \"a\": data_offsets");
  row("negative dim",
      safetensorsBytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data),
      "tensor \"a\": shape");
  row("huge shape",
      safetensorsBytes(
          R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", data),
      "tensor \"a\": shape");
  row("offsets past 2^53",
      safetensorsBytes(R"({"a":{"dtype":"U8","shape":[2],)"
                       R"("data_offsets":[18446744073709551613,18446744073709551615]}})",
                       data),
      "tensor \"a\": data_offsets [18446744073709551613,18446744073709551615] run past");
  row("missing field", safetensorsBytes(R"({"a":{"dtype":"F32","shape":[2]}})", data),
      "tensor \"a\": entry needs");
  row("overlap",
      safetensorsBytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       floatBytes({1, 2, 3})),
      "tensor \"b\" overlaps tensor \"a\"");
  row("gap", safetensorsBytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data),
      "tensor \"a\": gap");
  row("trailing bytes", safetensorsBytes(good, data + "xx"), "data section is 10 bytes");
  row("duplicate name",
      safetensorsBytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                       data),
      "duplicate key \"a\"");
  row("bad metadata", safetensorsBytes(R"({"__metadata__":{"n":1}})", ""), "__metadata__");
}

void TestIo::safetensorsErrors() {
  QFETCH(QByteArray, bytes);
  QFETCH(QString, what);
  QTemporaryDir dir;
  const std::string path = dir.filePath("bad.safetensors").toStdString();
  writeRaw(path, bytes.toStdString());
  Result<std::vector<NamedTensor>> r = readSafetensors(path);
  QVERIFY(!r.ok());
  const QString msg = QString::fromStdString(r.error().message);
  QVERIFY2(msg.startsWith(QString::fromStdString(path)), qPrintable(msg));
  QVERIFY2(msg.contains(what), qPrintable(msg));

  Result<std::vector<NamedTensor>> missing = readSafetensors(path + ".nope");
  QVERIFY(!missing.ok());
  QVERIFY(QString::fromStdString(missing.error().message).contains("No such file"));
}

void TestIo::safetensorsRejectsBadInput() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("w.safetensors").toStdString();
  NamedTensor shortData = makeTensor<float>("w", DType::F32, {2, 2});
  shortData.data.pop_back();
  Status st = writeSafetensors(path, {shortData});
  QVERIFY(!st.ok());
  QVERIFY2(QString::fromStdString(st.message()).contains("tensor \"w\""), st.message().c_str());

  NamedTensor a = makeTensor<float>("same", DType::F32, {1});
  st = writeSafetensors(path, {a, a});
  QVERIFY(!st.ok());
  QVERIFY(QString::fromStdString(st.message()).contains("\"same\""));
  QVERIFY(!writeSafetensors(path, {makeTensor<float>("__metadata__", DType::F32, {1})}).ok());
  QVERIFY(!QFile::exists(QString::fromStdString(path)));
}

void TestIo::atomicWrite() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("project.json").toStdString();
  QVERIFY(writeFileAtomic(path, "first version").ok());
  QCOMPARE(readAll(path), std::string("first version"));
  QVERIFY(writeFileAtomic(path, "second").ok());
  QCOMPARE(readAll(path), std::string("second"));
  QVERIFY(writeFileAtomic(path, "").ok());
  QCOMPARE(fileSize(path), int64_t(0));
  QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden),
           QStringList{"project.json"});
}

void TestIo::atomicWriteFailureLeavesNothing() {
  QTemporaryDir dir;
  // The rename fails: the target is a non-empty directory.
  QVERIFY(QDir(dir.path()).mkpath("taken/inner"));
  const std::string taken = dir.filePath("taken").toStdString();
  Status st = writeFileAtomic(taken, "bytes");
  QVERIFY(!st.ok());
  QVERIFY2(QString::fromStdString(st.message()).contains(QString::fromStdString(taken)),
           st.message().c_str());
  QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden),
           QStringList{"taken"});

  // The temporary cannot even be created: the folder does not exist.
  const std::string nowhere = dir.filePath("missing/x.bin").toStdString();
  st = writeFileAtomic(nowhere, "bytes");
  QVERIFY(!st.ok());
  const QString msg = QString::fromStdString(st.message());
  QVERIFY2(msg.contains(QString::fromStdString(nowhere)), qPrintable(msg));
  QVERIFY2(msg.contains(std::strerror(ENOENT)), qPrintable(msg));
}

QTEST_APPLESS_MAIN(TestIo)
#include "tst_io.moc"

// Projects as a person writes them: every example reads back the same, stays about
// as short as it was, keeps its head comment, and an edit to one node leaves every
// other line of the file as it was.
void TestIo::projectText() {
  using google::protobuf::util::MessageDifferencer;
  for (const QString& name : QDir(NETLOOM_SOURCE_DIR "/projects").entryList({"*.nlproj"})) {
    const std::string path = (NETLOOM_SOURCE_DIR "/projects/" + name).toStdString();
    QFile f(QString::fromStdString(path));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const std::string original = f.readAll().toStdString();
    auto p = loadProject(path);
    QVERIFY(p.ok());
    // Without the original: schema order, only what is set, compact.
    const std::string fresh = projectToText(*p);
    auto again = parseProject(fresh, path);
    QVERIFY2(again.ok(), fresh.c_str());
    QVERIFY(MessageDifferencer::Equals(*again, *p));
    QVERIFY2(std::count(fresh.begin(), fresh.end(), '\n') <=
                 std::count(original.begin(), original.end(), '\n') + 5,
             fresh.c_str());
    QVERIFY(fresh.rfind("name: ", 0) == 0);
    QVERIFY(fresh.find("format_version") < fresh.find("model {"));
    // With it: unchanged, the same bytes.
    QCOMPARE(QByteArray::fromStdString(projectToText(*p, original)),
             QByteArray::fromStdString(original));
    // One attribute of the first layer node changed: only that node's line differs.
    proto::Project edited = *p;
    proto::NodeDef* node = edited.mutable_model()->mutable_nodes(2);
    (*node->mutable_attrs())["note_for_test"].set_s("x");
    const std::string text = projectToText(edited, original);
    auto back = parseProject(text, path);
    QVERIFY(back.ok() && MessageDifferencer::Equals(*back, edited));
    QStringList before = QString::fromStdString(original).split('\n');
    QStringList after = QString::fromStdString(text).split('\n');
    QCOMPARE(after.size(), before.size());
    int differ = 0;
    for (int i = 0; i < before.size(); ++i) differ += before[i] != after[i];
    QVERIFY2(differ == 1, qPrintable(QString::fromStdString(text)));
    QVERIFY(after[0].startsWith("#"));
  }
  // What the text format must escape, and an enum value this build has no name for,
  // read back as they were.
  proto::Project odd;
  odd.set_name("quote \" backslash \\ newline \n tab \t ünïcode # not a comment");
  odd.mutable_train()->mutable_optimizer()->set_kind(proto::Optimizer::Kind(42));
  odd.mutable_train()->mutable_optimizer()->set_lr(1e-7);
  auto back = parseProject(projectToText(odd), "odd");
  QVERIFY2(back.ok(), projectToText(odd).c_str());
  QVERIFY(MessageDifferencer::Equals(*back, odd));
}
