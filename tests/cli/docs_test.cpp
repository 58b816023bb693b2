// The documentation a user reads: README.md's links into docs/ resolve,
// every pcgx subcommand has its section in docs/cli.md, the README stays a
// README, and no source comment sends a reader outside the repository.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_pcgx.h"

namespace {

namespace fs = std::filesystem;
const fs::path kSource = PCGX_SOURCE_DIR;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// GitHub's anchor of a heading: lowercase, spaces to '-', punctuation
// other than '-' and '_' dropped.
std::string slug(const std::string& heading) {
  std::string out;
  for (const char c : heading) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (c == ' ' || c == '-') out += '-';
    else if (c == '_') out += '_';
  }
  return out;
}

bool has_anchor(const std::string& markdown, const std::string& anchor) {
  std::istringstream in(markdown);
  for (std::string line; std::getline(in, line);) {
    const size_t hashes = line.find_first_not_of('#');
    if (hashes == 0 || hashes == std::string::npos || line[hashes] != ' ') continue;
    if (slug(line.substr(hashes + 1)) == anchor) return true;
  }
  return false;
}

TEST(Docs, ReadmeLinksIntoDocsResolve) {
  const std::string readme = read(kSource / "README.md");
  const std::regex link(R"(\]\((docs/[^)#\s]*)(#[^)\s]*)?\))");
  int links = 0;
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), link); it != std::sregex_iterator(); ++it) {
    const fs::path target = kSource / (*it)[1].str();
    ++links;
    ASSERT_TRUE(fs::exists(target)) << (*it)[0].str() << ": no such file";
    if ((*it)[2].matched && fs::is_regular_file(target)) {
      EXPECT_TRUE(has_anchor(read(target), (*it)[2].str().substr(1))) << (*it)[0].str() << ": no such heading";
    }
  }
  EXPECT_GE(links, 5) << "the README links to its docs";
}

TEST(Docs, EverySubcommandIsInTheCommandReference) {
  const auto help = pcgx::testing::run("--help");
  ASSERT_EQ(help.code, 0) << help.out;
  const size_t at = help.out.find("Subcommands:");
  ASSERT_NE(at, std::string::npos) << help.out;
  const std::string cli = read(kSource / "docs/cli.md");
  std::istringstream in(help.out.substr(at));
  std::string line;
  std::getline(in, line);
  int commands = 0;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name;
    if (!(words >> name)) continue;
    ++commands;
    EXPECT_NE(cli.find("pcgx " + name), std::string::npos) << "docs/cli.md does not describe `pcgx " << name << "`";
  }
  EXPECT_GE(commands, 10);
}

TEST(Docs, ReadmeIsShort) {
  std::istringstream in(read(kSource / "README.md"));
  int lines = 0;
  for (std::string l; std::getline(in, l);) ++lines;
  EXPECT_LE(lines, 260) << "README.md is for users: move detail to docs/";
  std::istringstream first(read(kSource / "README.md"));
  std::string l;
  std::getline(first, l);
  std::getline(first, l);
  std::getline(first, l);
  EXPECT_EQ(l, "```") << "the README starts with the two set-up commands";
  std::getline(first, l);
  EXPECT_EQ(l.rfind("scripts/demo.sh", 0), 0u) << l;
  std::getline(first, l);
  EXPECT_EQ(l.rfind("scripts/test.sh", 0), 0u) << l;
}

// Comments cite docs/ and the papers by title: a clone has nothing beside it.
TEST(Docs, NoCommentPointsOutsideTheRepository) {
  std::vector<std::string> found;
  for (const char* dir : {"pcg", "generator", "verifier", "rulesets", "rulegen", "search", "runtime", "runner", "importer", "tools", "tests",
                          "bench", "fuzz", "axioms", "scripts"}) {
    for (const auto& e : fs::recursive_directory_iterator(kSource / dir)) {
      if (!e.is_regular_file()) continue;
      const std::string ext = e.path().extension().string();
      if (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".smt2" && ext != ".sh" && ext != ".py" && ext != ".txt") continue;
      std::istringstream in(read(e.path()));
      int n = 0;
      for (std::string line; std::getline(in, line);) {
        ++n;
        const size_t c = line.find_first_not_of(" \t");
        if (c == std::string::npos) continue;
        const bool comment = line.compare(c, 2, "//") == 0 || line[c] == '#' || line[c] == ';';
        if (comment && (line.find("../shared") != std::string::npos || line.find("DESIGN.md") != std::string::npos ||
                        line.find("shared/papers") != std::string::npos))
          found.push_back(fs::relative(e.path(), kSource).string() + ":" + std::to_string(n));
      }
    }
  }
  EXPECT_TRUE(found.empty()) << found.size() << " comments, the first " << (found.empty() ? "" : found.front());
}

}  // namespace
