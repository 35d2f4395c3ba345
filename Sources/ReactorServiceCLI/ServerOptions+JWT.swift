import ArgumentParser
import ReactorService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ServerOptions {
    /// The JWT verification `--jwt-secret` or `--jwt-key` (or their variables) turn on, with
    /// `--jwt-issuer`, `--jwt-audience`, `--jwt-leeway` and `--jwt-admin-claim`; nil without
    /// either (open mode). A secret too short, a key file that is missing or no usable public
    /// key, both given, or a JWT option without a key: an error naming the flag or variable.
    func jwtVerification(_ environment: Environment) throws -> JWTVerification? {
        func source(_ flag: Any?, _ name: String) -> String {
            flag != nil ? "--\(name)" : "REACTORD_" + String(name.uppercased().map { $0 == "-" ? "_" : $0 })
        }
        let secret: String? = try jwtSecret ?? environment.value("REACTORD_JWT_SECRET")
        let keyPath: String? = try jwtKey ?? environment.value("REACTORD_JWT_KEY")
        let issuer: String? = try jwtIssuer ?? environment.value("REACTORD_JWT_ISSUER")
        let audience: String? = try jwtAudience ?? environment.value("REACTORD_JWT_AUDIENCE")
        let leeway: Double? = try jwtLeeway ?? environment.value("REACTORD_JWT_LEEWAY")
        let adminClaim: String? = try jwtAdminClaim ?? environment.value("REACTORD_JWT_ADMIN_CLAIM")
        if secret != nil && keyPath != nil {
            throw ValidationError(
                "\(source(jwtKey, "jwt-key")): give either a JWT secret or a key, not both "
                    + "(\(source(jwtSecret, "jwt-secret")) is set too)")
        }
        var verification: JWTVerification
        if let secret {
            do {
                verification = try JWTVerification(secret: secret)
            } catch {
                throw ValidationError("\(source(jwtSecret, "jwt-secret")): \(error)")
            }
        } else if let keyPath {
            let name = source(jwtKey, "jwt-key")
            guard let data = try? Data(contentsOf: URL(fileURLWithPath: keyPath)) else {
                throw ValidationError("\(name): cannot read the key file '\(keyPath)'")
            }
            do {
                verification = try JWTVerification(publicKeyPEM: String(decoding: data, as: UTF8.self))
            } catch {
                throw ValidationError("\(name): '\(keyPath)' is \(error)")
            }
        } else {
            for (value, flag, name) in [
                (issuer as Any?, jwtIssuer as Any?, "jwt-issuer"), (audience, jwtAudience, "jwt-audience"),
                (leeway, jwtLeeway, "jwt-leeway"), (adminClaim, jwtAdminClaim, "jwt-admin-claim"),
            ]
            where value != nil {
                throw ValidationError(
                    "\(source(flag, name)) needs --jwt-secret or --jwt-key (REACTORD_JWT_SECRET or REACTORD_JWT_KEY)")
            }
            return nil
        }
        for (value, flag, name) in [(issuer, jwtIssuer, "jwt-issuer"), (audience, jwtAudience, "jwt-audience")]
        where value?.isEmpty == true {
            throw ValidationError("\(source(flag, name)) must not be empty (leave it out to accept any)")
        }
        verification.issuer = issuer
        verification.audience = audience
        if let leeway {
            guard leeway.isFinite, leeway >= 0, leeway <= 86_400 else {
                throw ValidationError(
                    "\(source(jwtLeeway, "jwt-leeway")) must be a number of seconds from 0 to 86400 (got \(leeway))")
            }
            verification.leeway = leeway
        }
        if let adminClaim {
            guard !adminClaim.isEmpty else {
                throw ValidationError("\(source(jwtAdminClaim, "jwt-admin-claim")) must not be empty")
            }
            verification.adminClaim = adminClaim
        }
        return verification
    }
}
