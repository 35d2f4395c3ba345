public enum ReactorServicePlaceholder {}
