#pragma once
// Character-level language-model data: a text becomes a sequence of token ids (one per
// distinct byte, ids in byte order, as in nanoGPT's shakespeare_char), and example i is the
// window of seq_len tokens starting at i·stride with the same window shifted by one as its
// target: the model learns to predict every next character at once.
#include <string>
#include <vector>

#include "ember/data/dataset.h"

namespace ember::data {

// The distinct bytes of a text, sorted; id = position.
class CharVocabulary {
 public:
  CharVocabulary() = default;
  explicit CharVocabulary(const std::string& text);
  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  const std::string& chars() const { return chars_; }
  // Errors name the character that is not in the vocabulary / the id out of range.
  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;
  char decode(int64_t id) const;

 private:
  std::string chars_;
  int16_t id_of_[256];  // -1 where the byte is not in the vocabulary
};

struct CharTextOptions {
  int64_t seq_len = 64;
  int64_t stride = 0;  // 0: seq_len (windows do not overlap)
};

// Example i: data = ids[s, s+seq_len), target = ids[s+1, s+seq_len+1), s = i·stride, int64 [seq_len].
class CharTextDataset : public Dataset {
 public:
  // The vocabulary is the text's own unless one is given (e.g. the training split's for a test split).
  CharTextDataset(const std::string& text, CharTextOptions options = {}, const CharVocabulary* vocabulary = nullptr);
  // A text file, gzipped or not (at most 1 GiB).
  static CharTextDataset from_file(const std::string& path, CharTextOptions options = {});

  int64_t size() const override { return size_; }
  Example<> get(int64_t index) const override;
  const CharVocabulary& vocabulary() const { return vocabulary_; }
  const Tensor& tokens() const { return tokens_; }  // int64 [n]
  // Shannon entropy of the text's character frequencies in nats: the loss of the best model
  // that ignores context, so the bar a language model must clear.
  double unigram_entropy() const;

 private:
  CharVocabulary vocabulary_;
  Tensor tokens_;
  CharTextOptions options_;
  int64_t size_ = 0;
};

// Some of Shakespeare's sonnets (public domain, about 5 KB), the default text of
// examples/train_charlm so that it runs with no files.
const std::string& embedded_sonnets();

}  // namespace ember::data
