/* kiln_startup.c: start-up code of the runner firmware for any Cortex-M: the vector table, a
 * reset handler that sets up the C runtime (data, bss, FPU) and calls main, and handlers a
 * port may override (SysTick_Handler). No semihosting: the firmware runs on a board alone.
 * A fault stops the core in a loop; the host then hears nothing and says so. */
#include <stdint.h>

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern int main(void);

void Reset_Handler(void)
{
    for (uint32_t *src = &_sidata, *dst = &_sdata; dst < &_edata;)
        *dst++ = *src++;
    for (uint32_t *dst = &_sbss; dst < &_ebss;)
        *dst++ = 0;
#if defined(__ARM_FP)
    /* Full access to CP10/CP11 (the FPU) in CPACR, before any floating-point instruction. */
    *(volatile uint32_t *)0xE000ED88 |= 0xFu << 20;
    __asm volatile("dsb\n\tisb" ::: "memory");
#endif
    main();
    for (;;) {
    }
}

void Default_Handler(void)
{
    for (;;) {
    }
}

void SysTick_Handler(void) __attribute__((weak, alias("Default_Handler")));

__attribute__((section(".isr_vector"), used))
static void (*const vectors[16])(void) = {
    (void (*)(void))&_estack, /* initial stack pointer */
    Reset_Handler,
    Default_Handler, /* NMI */
    Default_Handler, /* HardFault */
    Default_Handler, /* MemManage */
    Default_Handler, /* BusFault */
    Default_Handler, /* UsageFault */
    Default_Handler, /* SecureFault (v8-M) */
    0, 0, 0,
    Default_Handler, /* SVCall */
    Default_Handler, /* DebugMonitor */
    0,
    Default_Handler, /* PendSV */
    SysTick_Handler,
};
