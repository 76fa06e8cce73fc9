#pragma once
// OrderedDict: string keys in insertion order with O(1) lookup, as LibTorch's
// torch::OrderedDict. Modules use it for parameters, buffers and children, so that
// state_dict() and named_parameters() list entries in registration order, as PyTorch does.
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/tensor/error.h"

namespace ember {

// An entry of an OrderedDict, as LibTorch's: item.key(), item.value(), *item; and, for
// `for (auto& [name, tensor] : module->named_parameters())`, a structured binding.
template <class Value>
class OrderedDictItem {
 public:
  OrderedDictItem(std::string key, Value value) : key_(std::move(key)), value_(std::move(value)) {}
  const std::string& key() const { return key_; }
  Value& value() { return value_; }
  const Value& value() const { return value_; }
  Value& operator*() { return value_; }
  const Value& operator*() const { return value_; }
  Value* operator->() { return &value_; }
  const Value* operator->() const { return &value_; }
  template <size_t I>
  decltype(auto) get() const {
    if constexpr (I == 0)
      return (key_);
    else
      return (value_);
  }
  template <size_t I>
  decltype(auto) get() {
    if constexpr (I == 0)
      return (static_cast<const std::string&>(key_));
    else
      return (value_);
  }

 private:
  std::string key_;
  Value value_;
};

template <class Value>
class OrderedDict {
 public:
  using Item = OrderedDictItem<Value>;

  OrderedDict() = default;
  explicit OrderedDict(std::string what) : what_(std::move(what)) {}

  // Throws when `key` is already present.
  Value& insert(std::string key, Value value) {
    EMBER_CHECK(!contains(key), what_, " '", key, "' already exists");
    index_.emplace(key, items_.size());
    items_.push_back(Item(std::move(key), std::move(value)));
    return items_.back().value();
  }
  // Inserts or replaces, keeping the original position of an existing key.
  Value& insert_or_assign(const std::string& key, Value value) {
    if (auto* v = find(key)) return *v = std::move(value);
    return insert(key, std::move(value));
  }
  void erase(const std::string& key) {
    auto it = index_.find(key);
    EMBER_CHECK(it != index_.end(), what_, " '", key, "' does not exist");
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(it->second));
    index_.clear();
    for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].key(), i);
  }

  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  Value* find(const std::string& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].value();
  }
  const Value* find(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].value();
  }
  Value& operator[](const std::string& key) {
    auto* v = find(key);
    EMBER_CHECK(v != nullptr, what_, " '", key, "' does not exist");
    return *v;
  }
  const Value& operator[](const std::string& key) const {
    const auto* v = find(key);
    EMBER_CHECK(v != nullptr, what_, " '", key, "' does not exist");
    return *v;
  }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  void clear() {
    items_.clear();
    index_.clear();
  }
  typename std::vector<Item>::iterator begin() { return items_.begin(); }
  typename std::vector<Item>::iterator end() { return items_.end(); }
  typename std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  typename std::vector<Item>::const_iterator end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& it : items_) out.push_back(it.key());
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    for (const auto& it : items_) out.push_back(it.value());
    return out;
  }

 private:
  std::string what_ = "key";
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace ember

template <class Value>
struct std::tuple_size<::ember::OrderedDictItem<Value>> : std::integral_constant<size_t, 2> {};
template <class Value>
struct std::tuple_element<0, ::ember::OrderedDictItem<Value>> {
  using type = const std::string;
};
template <class Value>
struct std::tuple_element<1, ::ember::OrderedDictItem<Value>> {
  using type = Value;
};
