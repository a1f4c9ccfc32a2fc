// Parse errors: MLIR's messages, at the offending token, one chunk each.
//
// RUN: commlir-opt --allow-unregistered-dialect %s --split-input-file --verify-diagnostics

// expected-error @below {{use of undeclared SSA value name}}
"my.use"(%undefined) : (i32) -> ()

// -----

// expected-note @below {{previously defined here}}
%0 = "my.def"() : () -> i32
// expected-error @below {{redefinition of SSA value}}
%0 = "my.def"() : () -> i32

// -----

// expected-error @below {{operation defines 2 results but was provided 3 to bind}}
%a:3 = "my.two"() : () -> (i32, i32)

// -----

%0 = "my.def"() : () -> i32
// expected-error @below {{expects different type than prior uses}}
"my.use"(%0) : (f32) -> ()

// -----

%0 = "my.def"() : () -> i32
// expected-error @below {{expected 1 operand type but had 2}}
"my.use"(%0) : (i32, i32) -> ()

// -----

"my.region"() ({
  // expected-error @below {{reference to an undefined block}}
  "my.br"()[^nowhere] : () -> ()
}) : () -> ()

// -----

"my.region"() ({
^bb0:
  "my.br"()[^bb0] : () -> ()
// expected-error @below {{redefinition of block}}
^bb0:
  "my.end"() : () -> ()
}) : () -> ()

// -----

// expected-error @below {{integer bitwidth is limited to 16777215 bits}}
"my.op"() : () -> i99999999

// -----

// expected-error @below {{integer constant out of range for attribute}}
"my.op"() {a = 99999999999999999999999999999999999 : i64} : () -> ()

// -----

// expected-error @below {{integer constant out of range for attribute}}
"my.op"() {a = 256 : i8} : () -> ()

// -----

// expected-error @below {{negative integer literal not valid for unsigned integer type}}
"my.op"() {a = -1 : ui8} : () -> ()

// -----

// expected-error @below {{floating point value not valid for specified type}}
"my.op"() {a = 1.5 : i32} : () -> ()

// -----

// expected-error @below {{unknown escape in string literal}}
"my.op"() {a = "\q"} : () -> ()

// -----

// expected-error @below {{duplicate key 'a' in dictionary attribute}}
"my.op"() {a = 1, a = 2} : () -> ()

// -----

// expected-error @below {{undefined symbol alias id 'nothere'}}
"my.op"() {a = #nothere} : () -> ()

// -----

// expected-error @below {{undefined symbol alias id 'nothere'}}
"my.op"() : () -> !nothere

// -----

#a = 1 : i64
// expected-error @below {{redefinition of attribute alias id 'a'}}
#a = 2 : i64

// -----

// expected-error @below {{unranked tensors cannot have an encoding}}
"my.op"() : () -> tensor<*xf32, #my.enc>

// -----

// expected-error @below {{expected type}}
"my.op"() : () -> (i32, )

// -----

// expected-error @below {{attribute value}}
"my.op"() {a = } : () -> ()

// -----

// expected-error @below {{expected location}}
"my.op"() : () -> () loc(42)

// -----

// expected-error @below {{expected}}
"my.op"( : () -> ()
