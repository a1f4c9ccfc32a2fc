// The test-options pass records how its options were parsed, in canonical form.

// RUN: commlir-opt %s --test-options='flag=true count=3 name="a b" list=1,2,3' | FileCheck %s
// CHECK: test.options = "count=3 flag=true list=1,2,3 name={a b}"

// RUN: commlir-opt %s --test-options=flag | FileCheck %s --check-prefix=BARE
// BARE: test.options = "count=0 flag=true name="

// RUN: commlir-opt %s --pass-pipeline='builtin.module(test-options{list=1 list=2,3 count=-7})' | FileCheck %s --check-prefix=PIPE
// PIPE: test.options = "count=-7 flag=false list=1,2,3 name="

module {
}
