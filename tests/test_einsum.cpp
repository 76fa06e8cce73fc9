// einsum (Note [einsum]); its values and gradients against PyTorch are in test_reference*.cpp
// ("einsum_*"). Here: a gradient by finite differences, the edge shapes, and the refusals.
#include "helpers.h"

namespace ember {
namespace {

TEST(Einsum, GradientsMatchFiniteDifferences) {
  const auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& x) {
        return einsum("bhqd,bhkd->bhqk", {x[0], x[1]}) + einsum("ijkl->", {x[0]});
      },
      {randn({2, 2, 3, 4}, kFloat64), randn({2, 2, 3, 4}, kFloat64)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Einsum, EdgeShapes) {
  const Tensor a = randn({3, 4}), b = randn({4, 5});
  EXPECT_TRUE(testing::all_close(einsum(" ij , jk -> ik ", {a, b}), matmul(a, b), 1e-5, 1e-6));  // spaces
  EXPECT_EQ(einsum("ij->", {a}).sizes(), Shape{});
  EXPECT_EQ(einsum(",ij->ij", {full({}, 2.0f), a}).sizes(), (Shape{3, 4}));  // a 0-d operand
  EXPECT_EQ(einsum("ij,jk->ik", {zeros({3, 0}), zeros({0, 5})}).to_vector<float>(), std::vector<float>(15, 0.0f));
  EXPECT_EQ(einsum("Ab,bC", {zeros({2, 3}), zeros({3, 4})}).sizes(), (Shape{2, 4}));  // implicit: 'A' < 'C'
}

TEST(Einsum, RefusalsNameTheEquation) {
  const Tensor a = zeros({3, 4});
  EXPECT_ERROR_CONTAINS(einsum("ij,jk->ik", {a}), "einsum: 'ij,jk->ik' names 2 operand(s), but 1 were given");
  EXPECT_ERROR_CONTAINS(einsum("ijk", {a}), "einsum: 'ijk' names 3 dims of operand 0, which has shape [3, 4]");
  EXPECT_ERROR_CONTAINS(einsum("ij,ij->i", {a, zeros({3, 5})}),
                        "einsum: the letter 'j' has size 4 in one operand and 5 in operand 1");
  EXPECT_ERROR_CONTAINS(einsum("ij->k", {a}), "einsum: the output letter 'k' of 'ij->k' names no operand's dim");
  EXPECT_ERROR_CONTAINS(einsum("ij->ii", {a}), "einsum: the output letter 'i' repeats");
  EXPECT_ERROR_CONTAINS(einsum("ii->i", {zeros({3, 3})}), "repeats within operand 0 ('ii'), a diagonal");
  EXPECT_ERROR_CONTAINS(einsum("...j->j", {a}), "einsum: ellipsis ('...') is not supported yet");
  EXPECT_ERROR_CONTAINS(einsum("i1->i", {a}), "einsum: 'i1->i' has the character '1'");
  EXPECT_ERROR_CONTAINS(einsum("ij", {Tensor()}), "einsum: operand 0 is undefined");
}

}  // namespace
}  // namespace ember
