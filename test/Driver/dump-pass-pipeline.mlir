// Pass flags build the pipeline in command-line order; function passes nest implicitly and
// every option is printed with its value.

// RUN: commlir-opt %s -o /dev/null --dump-pass-pipeline --cse --test-count-ops --test-options='flag count=2 list=4,5' -dce 2>&1 | FileCheck %s
// CHECK: Pass Manager with 4 passes:
// CHECK-NEXT: builtin.module(cse,func.func(test-count-ops),test-options{count=2 flag=true list=4,5 name=},dce)

// RUN: commlir-opt %s -o /dev/null --dump-pass-pipeline --pass-pipeline=' builtin.module( func.func(cse, dce), symbol-dce )' 2>&1 | FileCheck %s --check-prefix=TEXT
// TEXT: builtin.module(func.func(cse,dce),symbol-dce)

func.func @f() {
  return
}
