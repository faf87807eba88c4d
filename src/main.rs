fn main() {
    std::process::exit(siloc::cli::main());
}
