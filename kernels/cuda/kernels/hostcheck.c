// hostcheck: the weight-unpacking and dot-product code of quant.cuh, built
// for the host, so a Go test (kernels/cuda, TestQuantOnHost) checks it
// against kernels/quant without a GPU.
//
// stdin: one row of COLS weights of ggml type TYPE (its GGUF bytes), then
// the row's activations quantised to 8 bits: COLS int8 values, COLS/32
// float32 scales xd, COLS/32 float32 xs. stdout: the COLS dequantised
// weights, then the dot product as mm_q computes it, one per line.

#include <stdio.h>
#include <stdlib.h>

#include "quant.cuh"

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: hostcheck TYPE COLS\n");
		return 2;
	}
	int type = atoi(argv[1]), cols = atoi(argv[2]);
	int bytes, weights;
	void (*unpack)(const uint8_t *, int, Chunk *);
	switch (type) {
	case 8: bytes = 34, weights = 32, unpack = unpack_q8_0; break;
	case 2: bytes = 18, weights = 32, unpack = unpack_q4_0; break;
	case 12: bytes = 144, weights = 256, unpack = unpack_q4_k; break;
	case 13: bytes = 176, weights = 256, unpack = unpack_q5_k; break;
	case 14: bytes = 210, weights = 256, unpack = unpack_q6_k; break;
	default: fprintf(stderr, "hostcheck: type %d\n", type); return 2;
	}
	if (cols <= 0 || cols % weights != 0) {
		fprintf(stderr, "hostcheck: %d columns\n", cols);
		return 2;
	}
	size_t rb = (size_t)cols / weights * bytes, nc = (size_t)cols / 32;
	uint8_t *row = malloc(rb);
	int *xq = malloc(cols);
	float *xd = malloc(4 * nc), *xs = malloc(4 * nc);
	if (!row || !xq || !xd || !xs || fread(row, 1, rb, stdin) != rb || fread(xq, 1, cols, stdin) != (size_t)cols ||
	    fread(xd, 4, nc, stdin) != nc || fread(xs, 4, nc, stdin) != nc) {
		fprintf(stderr, "hostcheck: short input\n");
		return 1;
	}
	float dot = 0.f;
	for (size_t c = 0; c < nc; c++) {
		Chunk ch;
		unpack(row, (int)c, &ch);
		for (int j = 0; j < 32; j++) printf("%.9g\n", chunk_weight(&ch, j));
		dot += chunk_dot(&ch, xq + 8 * c, xd[c], xs[c]);
	}
	printf("%.9g\n", dot);
	return 0;
}
