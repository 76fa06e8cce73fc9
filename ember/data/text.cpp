#include "ember/data/text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ember/data/gzip_file.h"
#include "ember/tensor/error.h"
#include "ember/tensor/ops.h"

namespace ember::data {

namespace {
std::string printable(unsigned char c) {
  if (c >= 32 && c < 127) return std::string("'") + static_cast<char>(c) + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", c);
  return buf;
}
}  // namespace

CharVocabulary::CharVocabulary(const std::string& text) {
  bool seen[256] = {};
  for (unsigned char c : text) seen[c] = true;
  for (int c = 0; c < 256; ++c)
    if (seen[c]) chars_.push_back(static_cast<char>(c));
  std::fill(std::begin(id_of_), std::end(id_of_), int16_t{-1});
  for (size_t i = 0; i < chars_.size(); ++i) id_of_[static_cast<unsigned char>(chars_[i])] = static_cast<int16_t>(i);
}

std::vector<int64_t> CharVocabulary::encode(const std::string& text) const {
  EMBER_CHECK(!chars_.empty(), "CharVocabulary::encode: the vocabulary is empty");
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    EMBER_CHECK(id_of_[c] >= 0, "CharVocabulary::encode: character ", printable(c), " at offset ", i,
                " is not in the vocabulary of ", chars_.size(), " characters");
    ids[i] = id_of_[c];
  }
  return ids;
}

char CharVocabulary::decode(int64_t id) const {
  EMBER_CHECK(id >= 0 && id < size(), "CharVocabulary::decode: id ", id, " is out of range for a vocabulary of ",
              size(), " characters");
  return chars_[static_cast<size_t>(id)];
}

std::string CharVocabulary::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int64_t id : ids) text.push_back(decode(id));
  return text;
}

CharTextDataset::CharTextDataset(const std::string& text, CharTextOptions options, const CharVocabulary* vocabulary)
    : vocabulary_(vocabulary ? *vocabulary : CharVocabulary(text)), options_(options) {
  EMBER_CHECK(options_.seq_len > 0, "CharTextDataset: seq_len must be positive, got ", options_.seq_len);
  EMBER_CHECK(options_.stride >= 0, "CharTextDataset: stride must be non-negative, got ", options_.stride);
  if (options_.stride == 0) options_.stride = options_.seq_len;
  const int64_t n = static_cast<int64_t>(text.size());
  EMBER_CHECK(n > options_.seq_len, "CharTextDataset: a text of ", n, " characters is too short for seq_len ",
              options_.seq_len, " (it needs at least seq_len + 1)");
  tokens_ = tensor(vocabulary_.encode(text));
  size_ = (n - 1 - options_.seq_len) / options_.stride + 1;
}

CharTextDataset CharTextDataset::from_file(const std::string& path, CharTextOptions options) {
  return CharTextDataset(read_gzip_or_plain(path, size_t{1} << 30, "CharTextDataset"), options);
}

Example<> CharTextDataset::get(int64_t index) const {
  check_index(index, "CharTextDataset");
  const int64_t start = index * options_.stride;
  // clone(): a sample owns its memory, so a batch does not keep the whole text alive through views.
  return {tokens_.narrow(0, start, options_.seq_len).clone(), tokens_.narrow(0, start + 1, options_.seq_len).clone()};
}

double CharTextDataset::unigram_entropy() const {
  std::vector<int64_t> counts(static_cast<size_t>(vocabulary_.size()), 0);
  const auto* ids = tokens_.data_ptr<int64_t>();
  const int64_t n = tokens_.numel();
  for (int64_t i = 0; i < n; ++i) ++counts[static_cast<size_t>(ids[i])];
  double entropy = 0;
  for (int64_t c : counts)
    if (c > 0) {
      const double p = static_cast<double>(c) / static_cast<double>(n);
      entropy -= p * std::log(p);
    }
  return entropy;
}

}  // namespace ember::data
