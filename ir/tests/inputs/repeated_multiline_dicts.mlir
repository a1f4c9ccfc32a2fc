// Repeated attribute and property dictionaries spanning lines: the fast parser serves the
// repeats from its cache of spellings and must still count their lines (the locations of
// everything after them depend on it).
"builtin.module"() ({
  "x.a"() {k = 1,
     j = 2} : () -> ()
  "x.a"() {k = 1,
     j = 2} : () -> ()
  "x.a"() {k = 1,
     j = 2} : () -> ()
  "x.p"() <{k = 1,
     j = 2}> : () -> ()
  "x.p"() <{k = 1,
     j = 2}> : () -> ()
  "x.last"() : () -> ()
}) : () -> ()
