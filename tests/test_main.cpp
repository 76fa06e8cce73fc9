#include <gtest/gtest.h>
#include <ember/ember.h>
TEST(Smoke, Add) {
  auto a = ember::ones({2, 3});
  auto b = a + a;
  std::cout << b << "\n";
  EXPECT_EQ(b.sum().item<float>(), 12.f);
}
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
