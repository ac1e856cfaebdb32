// SqlRow, the row type under both stores: SQLite's numbers arrive as numbers, libpq's values
// as text, and every accessor answers the same for both.
#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "store/sql.h"

namespace gpool::store {
namespace {

TEST(SqlRowTest, SqliteNumbersAndTextsReadTheSameAsLibpqText) {
  char dir[] = "/tmp/gpool-sqlrow-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  {
    auto conn = openSqliteConnection(std::string(dir) + "/t.db", "NORMAL", 1000);
    ASSERT_TRUE(conn.ok()) << conn.status().toString();
    auto rows =
        (*conn)->query("SELECT 42, 2.5, 'a long text that is not small', NULL, '17', -7", {});
    ASSERT_TRUE(rows.ok()) << rows.status().toString();
    ASSERT_EQ(rows->size(), 1u);
    // The same values as libpq delivers them: text.
    SqlRow libpq(std::vector<std::optional<std::string>>{
        "42", "2.5", "a long text that is not small", std::nullopt, "17", "-7"});
    for (SqlRow* row : {&(*rows)[0], &libpq}) {
      EXPECT_EQ(row->integer(0), 42);
      EXPECT_EQ(row->text(0), "42");
      EXPECT_DOUBLE_EQ(row->real(1), 2.5);
      EXPECT_EQ(row->text(1), "2.5");
      EXPECT_EQ(row->text(2), "a long text that is not small");
      EXPECT_TRUE(row->isNull(3));
      EXPECT_EQ(row->text(3), "");
      EXPECT_EQ(row->integer(3), 0);
      EXPECT_EQ(row->optInteger(3), std::nullopt);
      EXPECT_EQ(row->integer(4), 17);  // a text of digits still reads as a number
      EXPECT_EQ(row->optInteger(5), -7);
      EXPECT_EQ(row->takeText(2), "a long text that is not small");
      EXPECT_EQ(row->takeText(0), "42");
      EXPECT_TRUE(row->isNull(2));  // taken: the cell is empty
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpool::store
