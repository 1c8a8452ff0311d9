/* The backend's kernels compiled for the host (emu.h), and the table the
 * stand-in driver finds them in by name. A test (kernels/cuda) checks the
 * table against the kernel list the backend loads. */
#include "emu.h"

#include <utility>

#include "../../kernels/arborist.cu"
#include "emu_run.h"

template <typename T> using plain = typename std::remove_cv<typename std::remove_reference<T>::type>::type;

/* invoke calls k with its arguments read from params, as the driver
 * reads them: params[i] points at argument i's bytes. */
template <typename... A, size_t... I> static void invoke(void (*k)(A...), void **params, std::index_sequence<I...>) {
	k(*(plain<A> *)params[I]...);
}
template <typename... A> static void invoke(void (*k)(A...), void **params) {
	invoke(k, params, std::index_sequence_for<A...>{});
}

#define K(name) {#name, [](void **p) { invoke(name, p); }},

static const struct {
	const char *name;
	emu_kernel run;
} table[] = {
	K(embed_f32) K(embed_f16) K(embed_bf16)
	K(embed_q8_0) K(embed_q4_0) K(embed_q4_k) K(embed_q5_k) K(embed_q6_k)
	K(quantize_q8)
	K(mm_q8_0) K(mm_q4_0) K(mm_q4_k) K(mm_q5_k) K(mm_q6_k)
	K(mm_f32) K(mm_f16) K(mm_bf16)
	K(to_half) K(to_bf16) K(mm_tc_f16) K(mm_tc_bf16)
	K(rmsnorm) K(add) K(scale) K(softcap) K(add_row) K(glu) K(rope)
	K(gather) K(argmax)
	K(store_kv_f32) K(store_kv_f16) K(kv_gather) K(kv_put)
	K(attention_f32) K(attention_f16)
	K(f_norm) K(f_glu_q8) K(f_rope_f32) K(f_rope_f16) K(f_att_f32) K(f_att_f16)
#define KMM(sfx) K(f_mm_##sfx##_8) K(f_mm_##sfx##_16) K(f_mm_##sfx##_32) K(f_mm_##sfx##_64)
	KMM(q8_0) KMM(q4_0) KMM(q4_k) KMM(q5_k) KMM(q6_k)
	K(f_mm_f16_8) K(f_mm_f16_16) K(f_mm_f16_32)
};

extern "C" emu_kernel arborist_emu_kernel(const char *name) {
	for (const auto &e : table)
		if (strcmp(e.name, name) == 0)
			return e.run;
	return nullptr;
}
