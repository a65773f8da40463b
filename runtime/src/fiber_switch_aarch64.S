/* SPDX-License-Identifier: MIT */
/*
 * void weft__fiber_switch(weft__fiber_ctx_t *from, weft__fiber_ctx_t *to)
 *
 * AAPCS64: saves x19-x28, the frame pointer x29, the link register x30
 * and the low halves of v8-v15 (d8-d15) on the current stack, stores sp in
 * *from, loads *to's and restores the same.  A new fiber's frame holds
 * weft__fiber_start in the x30 slot and the fiber in the x19 slot.
 */
	.text
	.globl	weft__fiber_switch
	.hidden	weft__fiber_switch
	.type	weft__fiber_switch, %function
	.p2align 4
weft__fiber_switch:
	sub	sp, sp, #160
	stp	x19, x20, [sp, #0]
	stp	x21, x22, [sp, #16]
	stp	x23, x24, [sp, #32]
	stp	x25, x26, [sp, #48]
	stp	x27, x28, [sp, #64]
	stp	x29, x30, [sp, #80]
	stp	d8, d9, [sp, #96]
	stp	d10, d11, [sp, #112]
	stp	d12, d13, [sp, #128]
	stp	d14, d15, [sp, #144]
	mov	x2, sp
	str	x2, [x0]
	ldr	x2, [x1]
	mov	sp, x2
	ldp	x19, x20, [sp, #0]
	ldp	x21, x22, [sp, #16]
	ldp	x23, x24, [sp, #32]
	ldp	x25, x26, [sp, #48]
	ldp	x27, x28, [sp, #64]
	ldp	x29, x30, [sp, #80]
	ldp	d8, d9, [sp, #96]
	ldp	d10, d11, [sp, #112]
	ldp	d12, d13, [sp, #128]
	ldp	d14, d15, [sp, #144]
	add	sp, sp, #160
	ret
	.size	weft__fiber_switch, .-weft__fiber_switch

	.globl	weft__fiber_start
	.hidden	weft__fiber_start
	.type	weft__fiber_start, %function
	.p2align 4
weft__fiber_start:
	mov	x0, x19
	bl	weft__fiber_main
	brk	#0
	.size	weft__fiber_start, .-weft__fiber_start

	.section .note.GNU-stack,"",%progbits
