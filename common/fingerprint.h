// Content fingerprints: what a data folder, a weights file or a vocabulary holds, cheaply, so that
// a run is identified by what it trains on and not by where the files lie (the same data at another
// path is the same configuration; other data at the same path is not).
//
// A fingerprint hashes, for every regular file under the path (sorted, `.trainyard-cache` folders
// left out), its path relative to the root, its size, and its bytes — every byte while the whole
// tree is at most kWholeBytes; beyond that a sample: at most kSampledFiles files, spread evenly
// over the sorted list, each read at its start, middle and end (kSampledBytes in all). A 150 GB
// folder so costs one walk of its names and sizes plus kSampledBytes of reading. What a sample
// misses — bytes changed in place, in a file not sampled, its size kept — the fingerprint misses
// too.
//
// It is cached beside the data, in `<folder>/.trainyard-cache/fingerprint` (for a file,
// `<its folder>/.trainyard-cache/<name>.fingerprint`), keyed by the hash of every file's name, size
// and modification time, as the token cache is; a folder that cannot be written is fingerprinted
// again the next time, nothing more.
#pragma once

#include <cstdint>
#include <string>

namespace trainyard {

inline constexpr int64_t kWholeBytes = 64ll << 20;
inline constexpr int64_t kSampledBytes = 32ll << 20;
inline constexpr int64_t kSampledFiles = 1024;

struct Fingerprint {
  std::string hash;   // hex; equal for equal contents, wherever they lie
  int64_t files = 0;  // regular files counted
  int64_t bytes = 0;  // their sizes, summed
  bool sampled = false;
  bool from_cache = false;
  // "3f2a9c0e41d7b6a5 (6 files, 178 MB)": what a resolved config records.
  std::string describe() const;
};

// The fingerprint of the file or folder at `path`; std::runtime_error naming the path when it
// does not exist or cannot be read. Within a process each path is fingerprinted once.
Fingerprint content_fingerprint(const std::string& path);

}  // namespace trainyard
