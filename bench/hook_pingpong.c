/* Hook cost with two threads taking turns under a mutex, as torch's main and
 * autograd threads do, and 32 KiB of other memory touched between turns (a
 * training step's working set evicts the ring's lines).  Prints ns per call
 * of the recorder with and without recording (two clock reads included).
 * Usage: hook_pingpong OUTDIR */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "format.h"
#include "tracer.h"
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn, N = 200000, rec = 1; static uint64_t ns[2];
static volatile uint64_t work; static char poll_buf[1<<22];
static void *th(void *a){ int me=(int)(intptr_t)a; uint64_t tot[2]={0,0};
 for(int i=0;i<N;i++){ pthread_mutex_lock(&mu); while(turn!=me) pthread_cond_wait(&cv,&mu);
   for (int k=0;k<8;k++){ uint64_t t0=dsmt_now_ns(); if(rec) dsmt_ev_mem(DSMT_REC_ALLOC, DSMT_API_TORCH, 0, 0x1000+(i&63)*512, 512, 0, (void*)0x1234, tot); ns[me]+=dsmt_now_ns()-t0; for (int w=0;w<(1<<15);w+=64) poll_buf[(w*97+i*4096)&((1<<22)-1)]++; }
   turn=!me; pthread_cond_broadcast(&cv); pthread_mutex_unlock(&mu);} return 0; }
int main(int argc, char **argv){ if (argc < 2) return 2; setenv("DSMEMTRACE_DIR",argv[1],1); setenv("DSMEMTRACE_NATIVE_DEPTH","0",1); dsmt_config_init();
 for (rec=0; rec<2; rec++){ ns[0]=ns[1]=0; pthread_t a,b; pthread_create(&a,0,th,(void*)0); pthread_create(&b,0,th,(void*)1); pthread_join(a,0); pthread_join(b,0);
 printf("record=%d: %.1f ns per call (incl. 2 clock reads)\n", rec, (ns[0]+ns[1])/(2.0*N*8)); }
 dsmt_writer_stop(); }
