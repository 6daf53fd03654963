/* SPDX-License-Identifier: BSD-3-Clause */
/* The primal model's header. Its port (declaring port_model_ad) is written
 * into the directory ariadne_port_sources puts first on the include path,
 * where consumer_port.c's #include <port_model.h> finds it although this
 * header sits beside consumer_port.c. */
#ifndef PORT_MODEL_H
#define PORT_MODEL_H

double port_model(const double *x);

#endif
