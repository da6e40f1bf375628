// How long listing an image folder takes: writes FILES empty .jpg files in 10 class
// folders under a temporary folder (or lists DIR as it is), lists it as a run does
// (sorted classes, sorted files, nothing opened), and prints the time of each of
// three listings.
//   bench_image_listing [FILES | DIR]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/data/dataset.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  fs::path dir;
  fs::path made;
  const std::string arg = argc > 1 ? argv[1] : "100000";
  if (fs::is_directory(arg)) {
    dir = arg;
  } else {
    const long files = std::strtol(arg.c_str(), nullptr, 10);
    made = dir = fs::temp_directory_path() / ("netloom-listing-" + std::to_string(::getpid()));
    for (long i = 0; i < files; ++i) {
      const fs::path cls = dir / ("class" + std::to_string(i % 10));
      if (i < 10) fs::create_directories(cls);
      std::ofstream(cls / (std::to_string(i) + ".jpg"));
    }
  }
  for (int run = 0; run < 3; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    auto index = netloom::listImageFolder(dir.string());
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!index) {
      std::fprintf(stderr, "%s\n", index.error().message.c_str());
      return 1;
    }
    std::printf("listed %zu images in %zu classes: %.1f ms\n", index->paths.size(),
                index->classNames.size(), ms);
  }
  if (!made.empty()) fs::remove_all(made);
  return 0;
}
