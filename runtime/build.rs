//! Tells the tests which optional CPU instructions this machine has.

include!("host_instructions.rs");

fn main() {
    host_instructions();
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=host_instructions.rs");
}
