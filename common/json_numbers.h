// Numbers in JSON without losing a diverged figure: JSON has no NaN or infinity, and nlohmann
// writes them as null (which then reads back as "type must be number"). Non-finite values travel
// as the strings "nan", "inf" and "-inf". Used by the worker-to-controller messages and a Slurm
// task's records file.
#pragma once

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace trainyard {

inline nlohmann::json json_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

// Throws nlohmann::json::type_error (as a wrong type would) for anything else.
inline double number_from_json(const nlohmann::json& value) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (text == "nan") return std::nan("");
    if (text == "inf") return INFINITY;
    if (text == "-inf") return -INFINITY;
  }
  throw nlohmann::json::type_error::create(302, "a figure must be a number, nan, inf or -inf",
                                           &value);
}

// A whole number that fits int64_t; type_error otherwise. (nlohmann's get<int64_t>() casts a float
// such as 1e59 without a check: undefined behaviour, which the fuzzer found.)
inline int64_t integer_from_json(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) return value.get<int64_t>();
  } else if (value.is_number_integer()) {
    return value.get<int64_t>();
  }
  throw nlohmann::json::type_error::create(302, "not a whole number in range", &value);
}

// Field `key` of `object` as integer_from_json reads it, or `fallback` when it is missing or is not
// a whole number in range.
inline int64_t integer_or(const nlohmann::json& object, const char* key, int64_t fallback) {
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  try {
    return integer_from_json(*it);
  } catch (const nlohmann::json::type_error&) {
    return fallback;
  }
}

inline nlohmann::json json_numbers(const std::map<std::string, double>& values) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : values) out[key] = json_number(value);
  return out;
}

inline std::map<std::string, double> numbers_from_json(const nlohmann::json& values) {
  if (!values.is_object())
    throw nlohmann::json::type_error::create(302, "figures must be an object", &values);
  std::map<std::string, double> out;
  for (const auto& [key, value] : values.items()) out[key] = number_from_json(value);
  return out;
}

}  // namespace trainyard
