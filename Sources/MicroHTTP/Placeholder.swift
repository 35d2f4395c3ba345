public enum MicroHTTPPlaceholder {}
