#include <ember/ember.h>

#include <iostream>

int main() {
  const ember::Tensor a = ember::arange(6, ember::kFloat32).view({2, 3});
  const ember::Tensor s = a.matmul(a.t()).sum();
  if (s.item<float>() != 83.0f) {
    std::cerr << "consumer: wrong result " << s << "\n";
    return 1;
  }
  std::cout << "consumer: find_package(ember) works, sum(a @ a.T) = " << s << "\n";
  return 0;
}
