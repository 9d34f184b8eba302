/* Minimal Cortex-M start-up for the QEMU tests: a vector table and a reset handler that set up
 * the C runtime (data, bss, FPU, semihosting stdio, constructors) and exit with main's status,
 * which QEMU turns into its own exit code. Faults exit with status 99 instead of hanging. */
#include <stdint.h>
#include <stdlib.h>

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern int main(void);
extern void initialise_monitor_handles(void);
extern void __libc_init_array(void);

/* --specs=rdimon.specs with -nostartfiles: no crti/crtn, so the C library's hooks are empty. */
void _init(void) {}
void _fini(void) {}

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
    initialise_monitor_handles();
    __libc_init_array();
    exit(main());
}

/* A fault ends the run with a distinct status (semihosting works from a handler in QEMU). */
void Fault_Handler(void)
{
    _Exit(99);
}

__attribute__((section(".isr_vector"), used))
static void (*const vectors[16])(void) = {
    (void (*)(void))&_estack, /* initial stack pointer */
    Reset_Handler,
    Fault_Handler, /* NMI */
    Fault_Handler, /* HardFault */
    Fault_Handler, /* MemManage */
    Fault_Handler, /* BusFault */
    Fault_Handler, /* UsageFault */
    Fault_Handler, /* SecureFault (v8-M) */
    0, 0, 0,
    Fault_Handler, /* SVCall */
    Fault_Handler, /* DebugMonitor */
    0,
    Fault_Handler, /* PendSV */
    Fault_Handler, /* SysTick */
};
