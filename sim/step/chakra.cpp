#include "sim/step/chakra.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "base/error.h"
#include "base/input_files.h"
#include "base/json_reader.h"

namespace hcclsim {
namespace {

constexpr std::uint64_t kMaxTraceBytes = std::uint64_t{1} << 30;   // 1 GiB per rank's file

// et_def.proto field numbers hcclsim reads or writes.
namespace field {
constexpr int kMetaVersion = 1;
constexpr int kNodeId = 1, kNodeName = 2, kNodeType = 3, kCtrlDeps = 4, kDataDeps = 5, kDuration = 7, kNodeAttr = 10;
constexpr int kAttrName = 1, kInt32 = 7, kInt64 = 9, kUint32 = 11, kUint64 = 13, kSint32 = 15, kSint64 = 17,
              kFixed32 = 19, kFixed64 = 21, kSfixed32 = 23, kSfixed64 = 25, kBool = 27, kString = 29;
}  // namespace field

enum Wire : int { kVarint = 0, kFixed64Wire = 1, kLength = 2, kFixed32Wire = 5 };

// A bounded reader of protobuf wire data; `where` says which message is read.
class WireReader {
 public:
  WireReader(const std::string& bytes, std::size_t begin, std::size_t end, const std::string& file)
      : b_(bytes), at_(begin), end_(end), file_(file) {}
  bool done() const { return at_ >= end_; }
  std::size_t at() const { return at_; }
  [[noreturn]] void fail(const std::string& where, const std::string& why) const {
    throw InputError(file_, where + ": " + why + " (byte " + std::to_string(at_) + "); expected a Chakra execution "
                                                                                     "trace (et_def.proto messages, each after its length)");
  }
  std::uint64_t varint(const std::string& where) {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= end_) fail(where, "a number runs past the end of its message");
      const auto byte = static_cast<unsigned char>(b_[at_++]);
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
    fail(where, "a number longer than 10 bytes");
  }
  std::uint64_t fixed(int bytes, const std::string& where) {
    if (end_ - at_ < static_cast<std::size_t>(bytes)) fail(where, "a fixed-size number runs past the end of its message");
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(b_[at_++])) << (8 * i);
    return v;
  }
  // A length-delimited field's [begin, end).
  std::pair<std::size_t, std::size_t> span(const std::string& where) {
    const std::uint64_t n = varint(where);
    if (n > end_ - at_) fail(where, "a field of " + std::to_string(n) + " bytes runs past the end of its message");
    const std::size_t begin = at_;
    at_ += static_cast<std::size_t>(n);
    return {begin, at_};
  }
  std::string text(const std::string& where) {
    const auto [a, z] = span(where);
    return b_.substr(a, z - a);
  }
  void skip(int wire, const std::string& where) {
    switch (wire) {
      case kVarint: varint(where); return;
      case kFixed64Wire: fixed(8, where); return;
      case kLength: span(where); return;
      case kFixed32Wire: fixed(4, where); return;
      default: fail(where, "wire type " + std::to_string(wire) + " (groups and unknown types are not in et_def.proto)");
    }
  }
  const std::string& bytes() const { return b_; }
  const std::string& file() const { return file_; }

 private:
  const std::string& b_;
  std::size_t at_, end_;
  const std::string& file_;
};

std::int64_t as_signed(std::uint64_t v) { return static_cast<std::int64_t>(v); }
std::int64_t zigzag(std::uint64_t v) { return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1); }

void read_deps(WireReader& r, int wire, std::vector<std::uint64_t>& out, const std::string& where) {
  if (wire == kVarint) {
    out.push_back(r.varint(where));
    return;
  }
  if (wire != kLength) r.fail(where, "dependencies of wire type " + std::to_string(wire));
  const auto [a, z] = r.span(where);
  WireReader packed(r.bytes(), a, z, r.file());
  while (!packed.done()) out.push_back(packed.varint(where));
}

void read_attr(WireReader& r, ChakraNode& node, const std::string& where) {
  const auto [a, z] = r.span(where);
  WireReader m(r.bytes(), a, z, r.file());
  std::string name;
  std::optional<std::int64_t> number;
  std::optional<std::string> text;
  while (!m.done()) {
    const std::uint64_t key = m.varint(where);
    const int num = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    const auto expect = [&](int w) {
      if (wire != w) m.fail(where, "attribute field " + std::to_string(num) + " has wire type " + std::to_string(wire));
    };
    switch (num) {
      case field::kAttrName: expect(kLength); name = m.text(where); break;
      case field::kInt32:
      case field::kInt64: expect(kVarint); number = as_signed(m.varint(where)); break;
      case field::kUint32:
      case field::kUint64:
      case field::kBool: expect(kVarint); number = static_cast<std::int64_t>(m.varint(where)); break;
      case field::kSint32:
      case field::kSint64: expect(kVarint); number = zigzag(m.varint(where)); break;
      case field::kFixed32: expect(kFixed32Wire); number = static_cast<std::int64_t>(m.fixed(4, where)); break;
      case field::kSfixed32: expect(kFixed32Wire); number = static_cast<std::int32_t>(m.fixed(4, where)); break;
      case field::kFixed64:
      case field::kSfixed64: expect(kFixed64Wire); number = as_signed(m.fixed(8, where)); break;
      case field::kString: expect(kLength); text = m.text(where); break;
      default: m.skip(wire, where);   // doc_string, floats, lists, bytes
    }
  }
  if (name.empty()) return;
  if (number) node.ints[name] = *number;
  if (text) node.strings[name] = *text;
}

ChakraNode read_node(WireReader& r, std::size_t begin, std::size_t end, std::size_t index) {
  ChakraNode node;
  WireReader m(r.bytes(), begin, end, r.file());
  const std::string where = "node " + std::to_string(index);
  while (!m.done()) {
    const std::uint64_t key = m.varint(where);
    const int num = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    const auto expect = [&](int w) {
      if (wire != w) m.fail(where, "field " + std::to_string(num) + " has wire type " + std::to_string(wire));
    };
    switch (num) {
      case field::kNodeId: expect(kVarint); node.id = m.varint(where); break;
      case field::kNodeName: expect(kLength); node.name = m.text(where); break;
      case field::kNodeType: expect(kVarint); node.type = static_cast<int>(m.varint(where)); break;
      case field::kCtrlDeps: read_deps(m, wire, node.ctrl_deps, where); break;
      case field::kDataDeps: read_deps(m, wire, node.data_deps, where); break;
      case field::kDuration: expect(kVarint); node.duration_micros = m.varint(where); break;
      case field::kNodeAttr: expect(kLength); read_attr(m, node, where); break;
      default: m.skip(wire, where);   // start time, inputs, outputs
    }
  }
  return node;
}

// ---- writing ----
void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int num, int wire) { put_varint(out, static_cast<std::uint64_t>(num) << 3 | static_cast<std::uint64_t>(wire)); }
void put_bytes(std::string& out, int num, const std::string& bytes) {
  put_key(out, num, kLength);
  put_varint(out, bytes.size());
  out += bytes;
}
void put_number(std::string& out, int num, std::uint64_t v) {
  if (v == 0) return;   // proto3: a zero scalar is not written
  put_key(out, num, kVarint);
  put_varint(out, v);
}

}  // namespace

ChakraTrace decode_chakra(const std::string& bytes, const std::string& file) {
  ChakraTrace trace;
  trace.file = file;
  WireReader r(bytes, 0, bytes.size(), file);
  if (r.done()) r.fail("the file", "it is empty");
  {
    const auto [a, z] = r.span("the global metadata");
    WireReader m(bytes, a, z, file);
    while (!m.done()) {
      const std::uint64_t key = m.varint("the global metadata");
      if ((key >> 3) == field::kMetaVersion && (key & 7) == kLength) trace.version = m.text("the global metadata");
      else m.skip(static_cast<int>(key & 7), "the global metadata");
    }
  }
  while (!r.done()) {
    const std::size_t index = trace.nodes.size();
    const auto [a, z] = r.span("node " + std::to_string(index));
    trace.nodes.push_back(read_node(r, a, z, index));
  }
  return trace;
}

std::string encode_chakra(const ChakraTrace& trace) {
  std::string out;
  std::string meta;
  put_bytes(meta, field::kMetaVersion, trace.version.empty() ? "0.0.4" : trace.version);
  put_varint(out, meta.size());
  out += meta;
  for (const ChakraNode& n : trace.nodes) {
    std::string m;
    put_number(m, field::kNodeId, n.id);
    put_bytes(m, field::kNodeName, n.name);
    put_number(m, field::kNodeType, static_cast<std::uint64_t>(n.type));
    for (const auto& [num, deps] : {std::pair{field::kCtrlDeps, &n.ctrl_deps}, std::pair{field::kDataDeps, &n.data_deps}}) {
      if (deps->empty()) continue;
      std::string packed;
      for (std::uint64_t d : *deps) put_varint(packed, d);
      put_bytes(m, num, packed);
    }
    put_number(m, field::kDuration, n.duration_micros);
    for (const auto& [name, v] : n.ints) {
      std::string attr;
      put_bytes(attr, field::kAttrName, name);
      put_key(attr, field::kInt64, kVarint);
      put_varint(attr, static_cast<std::uint64_t>(v));
      put_bytes(m, field::kNodeAttr, attr);
    }
    for (const auto& [name, v] : n.strings) {
      std::string attr;
      put_bytes(attr, field::kAttrName, name);
      put_bytes(attr, field::kString, v);
      put_bytes(m, field::kNodeAttr, attr);
    }
    put_varint(out, m.size());
    out += m;
  }
  return out;
}

std::string encode_comm_groups(const std::map<std::string, std::vector<int>>& groups) {
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& [id, ranks] : groups) doc[id] = ranks;
  return doc.dump(1) + "\n";
}

ChakraWorkload read_chakra_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string where = "option --chakra";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(where, dir + " is not a directory (expected one holding PREFIX.<rank>.et files)");
  static const std::regex kName(R"((.+)\.([0-9]{1,7})\.et)");
  std::map<int, std::string> files;
  std::string prefix;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, kName)) continue;
    if (!prefix.empty() && m[1].str() != prefix) {
      throw InputError(where, dir + " holds traces of two workloads (" + printable(prefix) + ".*.et and " +
                                  printable(m[1].str()) + ".*.et); keep one per directory");
    }
    prefix = m[1].str();
    files[std::stoi(m[2].str())] = e.path().string();
  }
  if (ec) throw InputError(where, "cannot list " + dir + ": " + ec.message());
  if (files.empty()) throw InputError(where, dir + " holds no PREFIX.<rank>.et file");
  ChakraWorkload w;
  w.dir = dir;
  int expect = 0;
  for (const auto& [rank, file] : files) {
    if (rank != expect) {
      throw InputError(where, dir + ": rank " + std::to_string(expect) + "'s trace " + printable(prefix) + "." +
                                  std::to_string(expect) + ".et is missing (ranks 0.." + std::to_string(files.rbegin()->first) +
                                  " must all be there)");
    }
    ++expect;
    w.ranks.push_back(decode_chakra(read_regular_file(file, kMaxTraceBytes), file));
  }
  const std::string groups_file = (fs::path(dir) / "comm_group.json").string();
  if (fs::exists(groups_file, ec)) {
    const nlohmann::json doc = load_json_file(groups_file);
    const JsonLocation root{groups_file, "$"};
    if (!doc.is_object()) root.fail("expected an object {\"<process group id>\": [ranks], ...}");
    for (const auto& [id, ranks] : doc.items()) {
      const JsonLocation at = root.key(id);
      if (!ranks.is_array() || ranks.empty()) at.fail("expected a non-empty array of ranks");
      std::vector<int> members;
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        const nlohmann::json& v = ranks[i];
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= static_cast<std::int64_t>(w.ranks.size())) {
          at.index(i).fail("expected a rank 0.." + std::to_string(w.ranks.size() - 1) + " (the directory's traces)");
        }
        const int r = v.get<int>();
        if (std::find(members.begin(), members.end(), r) != members.end()) at.index(i).fail("rank " + std::to_string(r) + " twice");
        members.push_back(r);
      }
      w.groups[id] = members;
    }
  }
  return w;
}

}  // namespace hcclsim
