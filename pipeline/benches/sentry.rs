fn main() {} // placeholder until the sentry bench lands
