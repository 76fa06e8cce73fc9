#!/usr/bin/env python3
"""The coefficients of gelu's vector form (ember/tensor/cpu/vec_math.h, gelu8).

Prints Chebyshev interpolants, as float32 monomial coefficients, of
  erf(z) / z        in w = z^2 on [0, 1]                       (|z| < 1)
  h = a erfcx(a)    in s = (a - 2) / (a + 2), s in [-1/3, 1)   (a >= 1)
with erfc(a) = e^(-a^2) h / a, and each one's largest relative error over a dense grid once
its coefficients are rounded to float32. Standard library only (math.erf, math.erfc in double).
  python3 tools/fit_gelu.py
"""
import math
import struct


def to_float32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def chebyshev_interpolant(f, n):
    """Monomial coefficients (lowest first) in t of the degree n-1 interpolant of f on [-1, 1] at
    the n Chebyshev nodes."""
    nodes = [math.cos(math.pi * (k + 0.5) / n) for k in range(n)]
    fx = [f(t) for t in nodes]
    c = [2.0 / n * sum(fx[k] * math.cos(math.pi * j * (k + 0.5) / n) for k in range(n)) for j in range(n)]
    c[0] /= 2
    T = [[1.0], [0.0, 1.0]]  # T_j(t) in monomials
    for j in range(2, n):
        up = [0.0] + [2 * v for v in T[j - 1]]
        down = T[j - 2] + [0.0] * (len(up) - len(T[j - 2]))
        T.append([up[i] - down[i] for i in range(len(up))])
    p = [0.0] * n
    for j in range(n):
        for i, v in enumerate(T[j]):
            p[i] += c[j] * v
    return p


def horner(p, t):
    y = 0.0
    for v in reversed(p):
        y = y * t + v
    return y


def erf_over_z(w):
    if w == 0:
        return 2 / math.sqrt(math.pi)
    z = math.sqrt(w)
    return math.erf(z) / z


def h(u):
    if u == 0:
        return 1 / math.sqrt(math.pi)
    a = 1 / u
    if a < 25:
        return a * math.exp(a * a) * math.erfc(a)
    s, term = 1.0, 1.0  # the asymptotic series, far more than accurate enough here
    for k in range(1, 8):
        term *= -(2 * k - 1) / (2 * a * a)
        s += term
    return s / math.sqrt(math.pi)


# erf's polynomial is evaluated in w = z^2 itself (w in [0, 1], no centering needed): the
# interpolant in t = 2w - 1, re-expanded in w.
p_t = chebyshev_interpolant(lambda t: erf_over_z((t + 1) / 2), 6)
p_w = [0.0] * 6
for i, v in enumerate(p_t):  # t = 2w - 1
    for k in range(i + 1):
        p_w[k] += v * math.comb(i, k) * 2 ** k * (-1) ** (i - k)
p_w = [to_float32(v) for v in p_w]
err = max(abs(horner(p_w, w) / erf_over_z(w) - 1) for w in [i / 50000 for i in range(50001)])
print(f"erf(z) / z in w = z^2: relative error {err:.2g}")
print("  {" + ", ".join(f"{v:.9g}f" for v in p_w) + "}")
# h in s = (a - 2) / (a + 2), a = 2 (1 + s) / (1 - s): [1, inf) becomes [-1/3, 1), where h is
# smooth enough for one polynomial (in 1/a it needed two); interpolated in t = 1.5 s - 0.5 and
# re-expanded in s.
def h_of_s(s):
    return 1 / math.sqrt(math.pi) if s >= 1 else h((1 - s) / (2 * (1 + s)))


p_t = chebyshev_interpolant(lambda t: h_of_s((t + 0.5) / 1.5), 10)
p_s = [0.0] * 10
for i, v in enumerate(p_t):
    for k in range(i + 1):
        p_s[k] += v * math.comb(i, k) * 1.5 ** k * (-0.5) ** (i - k)
p_s = [to_float32(v) for v in p_s]
err = max(abs(horner(p_s, s) / h_of_s(s) - 1) for s in [-1 / 3 + 4 / 3 * i / 50000 for i in range(50001)])
print(f"h in s = (a - 2) / (a + 2): relative error {err:.2g}")
print("  {" + ", ".join(f"{v:.9g}f" for v in p_s) + "}")
