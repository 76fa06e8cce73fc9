#pragma once
// Helpers for the places that include the op list, ember/tensor/ops.def (Note [One declaration
// per op]). An entry's parameters and arguments are parenthesized lists: (const Tensor& self,
// int64_t dim) and (self, dim).

// (a, b) -> a, b: a parenthesized list spliced into a call.
#define EMBER_UNPAREN(...) __VA_ARGS__
// (self, a, b) -> (a, b): a method's parameters are its op's without self.
#define EMBER_DROP_SELF(self, ...) (__VA_ARGS__)
// In declarations a parameter's default is written out; in definitions, where C++ forbids
// repeating it, EMBER_DEFAULT expands to nothing (the list's own fallback).
#define EMBER_DEFAULT_IN_DECLARATION(...) = __VA_ARGS__
