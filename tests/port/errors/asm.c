/* expect: inline assembly */
double f(double x) {
  __asm__ volatile("" ::: "memory");
  return x * x;
}
